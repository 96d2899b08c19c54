#!/usr/bin/env python3
"""Reads bench/kernels_bench JSON (Google Benchmark format) and prints each version of the memory-bound CUDA
kernels (kernels/elementwise_versions.h, adamw_versions.h, cross_entropy_versions.h,
embedding_backward_versions.h) at GPT-2 shapes as a percent of the copy rate measured at the start
of that run (the pct_peak counter: the roofline time over the measured time). The last line is a one-line
brief for scripts/gpu_check.sh's summary: float32, v1 -> v2, per op. The target is >= 85%.

Usage: scripts/memory_bound_summary.py kernels-*.json
"""
import json
import sys

# The CUDA versions' names (their *_kernel_name in kernels/<op>_versions.h), v1 first in each pair.
PAIRS = {
    'gelu_fwd': ('v1-scalar', 'v2-vector128'),
    'gelu_bwd': ('v1-scalar', 'v2-vector128'),
    'residual_add': ('v1-scalar', 'v2-vector128'),
    'bias_add': ('v1-scalar', 'v2-vector128'),
    'add_inplace': ('v1-scalar', 'v2-vector128'),
    'adamw': ('v1-scalar', 'v2-vector128'),
    'cross_entropy': ('v1-block-per-row', 'v2-vector-row'),
    'embedding_bwd': ('v1-atomic', 'v2-sorted'),
}

pct = {}  # (op, dtype, impl) -> percent of the copy rate
for path in sys.argv[1:]:
    with open(path) as f:
        for case in json.load(f).get('benchmarks', []):
            parts = case.get('name', '').split('/')
            if len(parts) < 5 or parts[1] != 'gpt2' or parts[3] != 'cuda' or parts[0] not in PAIRS:
                continue
            if parts[4] not in PAIRS[parts[0]] or case.get('error_occurred') or 'pct_peak' not in case:
                continue
            pct[(parts[0], parts[2], parts[4])] = case['pct_peak']

if not pct:
    print('no memory-bound version cases at gpt2 shapes on cuda in', ' '.join(sys.argv[1:]) or 'no files')
    sys.exit(1)

print(f"{'op':<16}{'dtype':<6}{'v1':>26}{'v2':>26}")
for op, (v1, v2) in PAIRS.items():
    for dtype in ('f32', 'bf16'):
        a, b = pct.get((op, dtype, v1)), pct.get((op, dtype, v2))
        if a is None and b is None:
            continue
        show = lambda name, value: f"{name} {value:5.1f}%" if value is not None else f"{name}     -"
        print(f"{op:<16}{dtype:<6}{show(v1, a):>26}{show(v2, b):>26}")

brief = []
for op, (v1, v2) in PAIRS.items():
    a, b = pct.get((op, 'f32', v1)), pct.get((op, 'f32', v2))
    fmt = lambda value: '-' if value is None else f'{value:.0f}'
    brief.append(f'{op} {fmt(a)}->{fmt(b)}')
print('f32 % of copy v1->v2: ' + ', '.join(brief))
