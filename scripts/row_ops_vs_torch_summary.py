#!/usr/bin/env python3
"""Summarises scripts/bench_row_ops_vs_torch.sh's rounds: for every case both sides ran, the median over
the rounds of each round's median time, brigade's over PyTorch's (below 1: brigade is faster), and
brigade's percent of its bound (kernels_bench's pct_peak: the roofline time over the measured time).
Prints a markdown table and, with --json, writes the rounds and the summary.

Usage: scripts/row_ops_vs_torch_summary.py --brigade kernels-*.json --torch torch-*.json
           [--meta KEY=VALUE ...] [--json OUT]
"""
import argparse
import json
import statistics
import sys


def brigade_rounds(paths):
    """[{CASE/MODEL: (median us, pct_peak, bound label)}] per file (kernels_bench JSON): the "median"
    aggregate, or with a single repetition (no aggregates) the one run."""
    rounds = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        cases, runs = {}, {}
        for b in data.get("benchmarks", []):
            parts = b["run_name"].split("/")  # CASE/MODEL/f32/cpu/VERSION/real_time
            if len(parts) < 4:
                continue
            unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
            entry = (b["real_time"] * unit, b.get("pct_peak"), b.get("label", ""))
            key = f"{parts[0]}/{parts[1]}"
            if b.get("aggregate_name") == "median":
                cases[key] = entry
            elif b.get("run_type") == "iteration":
                runs.setdefault(key, []).append(entry)
        for key, entries in runs.items():
            if key not in cases:
                cases[key] = sorted(entries)[len(entries) // 2]
        rounds.append(cases)
    return rounds


def torch_rounds(paths):
    rounds = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        rounds.append({k: v["median_us"] for k, v in data["cases"].items()})
    return rounds, (data.get("torch", "?") if paths else "?")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brigade", nargs="+", required=True)
    parser.add_argument("--torch", nargs="+", required=True)
    parser.add_argument("--meta", nargs="*", default=[])
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    b_rounds = brigade_rounds(args.brigade)
    t_rounds, version = torch_rounds(args.torch)
    meta = dict(item.split("=", 1) for item in args.meta)
    meta["torch"] = version
    names = [k for k in b_rounds[0] if all(k in r for r in b_rounds + t_rounds)]
    summary = []
    print(f"brigade against PyTorch {version}, {len(b_rounds)} rounds, medians (us)")
    print("| case | brigade us | torch us | brigade / torch | brigade % of its bound |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in names:
        b = statistics.median(r[name][0] for r in b_rounds)
        t = statistics.median(r[name] for r in t_rounds)
        pcts = [r[name][1] for r in b_rounds if r[name][1] is not None]
        pct = statistics.median(pcts) if pcts else None
        summary.append({"case": name, "brigade_us": b, "torch_us": t, "ratio": b / t, "brigade_pct_of_bound": pct,
                        "bound": b_rounds[0][name][2],
                        "brigade_rounds_us": [r[name][0] for r in b_rounds],
                        "torch_rounds_us": [r[name] for r in t_rounds]})
        pct_text = f"{pct:.0f} ({b_rounds[0][name][2]})" if pct is not None else "-"
        print(f"| {name} | {b:.1f} | {t:.1f} | {b / t:.2f} | {pct_text} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "summary": summary}, f, indent=1)
        print(f"wrote {args.json}")
    return 0 if summary else 1


if __name__ == "__main__":
    sys.exit(main())
