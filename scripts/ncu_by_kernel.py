#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel summary into where a training step's GPU time goes.

Input: the CSV that `ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv PROGRAM` prints (one
row per kernel name and launch shape: invocations and the average duration). Output: one line per kernel and
grid, largest total first, in milliseconds per step (the totals divided by --steps, the number of steps the
program ran, warm-up included), and the total over all kernels. scripts/gpu_check.sh runs it on two steps of a
2-layer GPT-2-shaped model (bench/gpt2_step_bench).

Usage: scripts/ncu_by_kernel.py NCU_CSV --steps N [--top K] [--command TEXT]
"""
import argparse
import csv
import re
import sys


def short_name(kernel):
    """The kernel's name without its parameter list and brigade's namespaces."""
    name = re.sub(r'\(.*', '', kernel)
    for prefix in ('brigade::', 'kernels::', 'cuda::', '<unnamed>::', '(anonymous namespace)::'):
        name = name.replace(prefix, '')
    return name.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('csv_path')
    parser.add_argument('--steps', type=int, required=True, help='steps the profiled program ran (warm-up too)')
    parser.add_argument('--top', type=int, default=0, help='print only the K largest (0: all)')
    parser.add_argument('--command', default='', help='the profiled command, printed in the header')
    args = parser.parse_args()

    with open(args.csv_path, newline='') as f:
        rows = list(csv.reader(f))
    header = next((i for i, r in enumerate(rows) if 'Kernel Name' in r), None)
    if header is None:
        sys.exit(f'{args.csv_path}: no "Kernel Name" header: not an ncu --print-summary per-kernel --csv output')
    col = {name: i for i, name in enumerate(rows[header])}
    totals = {}  # (kernel, grid, block) -> [launches, ns]
    for r in rows[header + 1:]:
        if len(r) < len(col) or r[col['Metric Name']] != 'gpu__time_duration.sum':
            continue
        key = (short_name(r[col['Kernel Name']]), r[col['Grid Size']], r[col['Block Size']])
        launches = int(r[col['Invocations']].replace(',', ''))
        average_ns = float(r[col['Average']].replace(',', ''))
        entry = totals.setdefault(key, [0, 0.0])
        entry[0] += launches
        entry[1] += launches * average_ns
    if not totals:
        sys.exit(f'{args.csv_path}: no gpu__time_duration.sum rows')

    total_ms = sum(ns for _, ns in totals.values()) / 1e6 / args.steps
    launches = sum(n for n, _ in totals.values()) / args.steps
    if args.command:
        print(f'# {args.command}')
    print(f'# kernel time per step {total_ms:.2f} ms over {launches:.0f} launches')
    print('# ms/step   share  launches/step  kernel  grid  block')
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])
    for (kernel, grid, block), (n, ns) in ranked[:args.top or None]:
        ms = ns / 1e6 / args.steps
        print(f'{ms:9.3f} {100 * ms / total_ms:6.1f}% {n / args.steps:9.1f}  {kernel}  {grid}  {block}')


if __name__ == '__main__':
    main()
