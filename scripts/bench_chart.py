#!/usr/bin/env python3
"""Draws percent of peak per kernel from brigade benchmark JSON (scripts/bench_kernels.sh output).

    scripts/bench_chart.py bench/results/kernels-*.json bench/results/matmul-*.json -o chart.png
    scripts/bench_chart.py RESULTS.json --device cuda --filter 'gpt2' -o gpu.png
    scripts/bench_chart.py RESULTS.json --markdown          # a table for docs/kernels.md instead

One horizontal bar per case: pct_peak = 100 * t_roofline / t_measured (the percent of the nearer roofline
ceiling: the compute peak or the copy bandwidth measured at the start of that run; see
bench/bench_support.h). Cases are grouped by op/model/dtype/device, with brigade's implementations and the
baselines (cuBLAS, cuDNN) side by side in each group. Needs matplotlib (Debian: apt-get install
python3-matplotlib, then run it with /usr/bin/python3 if another python3 comes first on PATH).
"""
import argparse
import json
import re
import sys

BASELINES = ("cublas", "cudnn", "openblas")


def load(paths):
    """Returns (cases, contexts): cases as dicts with group, impl, pct, label; one context per file."""
    cases, contexts = [], []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        contexts.append(data.get("context", {}))
        by_name = {}
        for b in data.get("benchmarks", []):
            if b.get("error_occurred") or "pct_peak" not in b:
                continue
            # Prefer the median aggregate when repetitions were run; otherwise the (first) iteration run.
            name = b.get("run_name", b["name"])
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            if name in by_name and b.get("run_type") != "aggregate":
                continue
            by_name[name] = b
        for name, b in by_name.items():
            parts = name.split("/")
            if len(parts) < 5:
                continue  # not one of ours (op/model/dtype/device/impl)
            parts = parts[:5]
            cases.append({"group": "/".join(parts[:4]), "device": parts[3], "impl": parts[4],
                          "pct": float(b["pct_peak"]), "bound": b.get("label", ""),
                          "time": float(b.get("real_time", 0)), "unit": b.get("time_unit", ""),
                          "bytes": float(b.get("bytes/s", 0)), "flops": float(b.get("FLOP/s", 0))})
    return cases, contexts


def title_of(contexts):
    c = contexts[0] if contexts else {}
    lines = [f"brigade kernels: % of peak  ({c.get('brigade_device', '?')}, {c.get('brigade_date', '?')}, "
             f"commit {c.get('brigade_commit', '?')}, load {c.get('brigade_load_at_start', '?')})"]
    peaks = []
    if c.get("peak_cpu_copy_bytes_per_s"):
        peaks.append(f"CPU copy {float(c['peak_cpu_copy_bytes_per_s']) / 1e9:.1f} GB/s, "
                     f"{c.get('peak_cpu_flops_source', 'compute')} {float(c['peak_cpu_flops']) / 1e9:.1f} GFLOP/s")
    if c.get("peak_gpu_copy_bytes_per_s"):
        peaks.append(f"GPU copy {float(c['peak_gpu_copy_bytes_per_s']) / 1e12:.2f} TB/s, "
                     f"cuBLAS fp32 {float(c['peak_gpu_fp32_flops']) / 1e12:.1f} / "
                     f"bf16 {float(c['peak_gpu_bf16_flops']) / 1e12:.0f} TFLOP/s")
    if peaks:
        lines.append("measured peaks: " + "; ".join(peaks))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", help="Google Benchmark JSON files from scripts/bench_kernels.sh")
    parser.add_argument("-o", "--output", default="bench_chart.png", help="PNG to write")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="only this device's cases")
    parser.add_argument("--filter", help="regular expression a case's op/model/dtype/device must match")
    parser.add_argument("--markdown", action="store_true",
                        help="print a Markdown table of the cases instead of drawing (needs no matplotlib)")
    args = parser.parse_args()

    if args.markdown:
        cases, _ = load(args.json)
        cases = [c for c in cases if (not args.device or c["device"] == args.device)
                 and (not args.filter or re.search(args.filter, c["group"]))]
        to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
        print("| case | impl | ms per call | GB/s | GFLOP/s | % of peak | bound |")
        print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
        for c in cases:
            ms = c["time"] * to_ms.get(c["unit"], float("nan"))
            print(f"| {c['group']} | {c['impl']} | {ms:.3g} | {c['bytes'] / 1e9:.3g} | "
                  f"{c['flops'] / 1e9:.3g} | {c['pct']:.3g} | {c['bound']} |")
        return

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench_chart.py: matplotlib is missing. Install it (Debian: apt-get install python3-matplotlib, "
                 "then run this script with /usr/bin/python3; elsewhere: pip install matplotlib).")

    cases, contexts = load(args.json)
    if args.device:
        cases = [c for c in cases if c["device"] == args.device]
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c["group"])]
    if not cases:
        sys.exit("bench_chart.py: no cases with a pct_peak counter in " + ", ".join(args.json))

    groups = []
    for c in cases:
        if c["group"] not in groups:
            groups.append(c["group"])
    impls = sorted({c["impl"] for c in cases}, key=lambda i: (i in BASELINES, i))
    ours = [i for i in impls if i not in BASELINES]
    palette_ours = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#7f7f7f", "#bcbd22"]
    palette_base = {"cublas": "#ff7f0e", "cudnn": "#d62728"}
    color = {i: palette_base.get(i, palette_ours[ours.index(i) % len(palette_ours)] if i in ours else "#333")
             for i in impls}

    bar = 0.8 / max(1, max(sum(1 for c in cases if c["group"] == g) for g in groups))
    fig_height = 1.5 + 0.22 * len(cases) + 0.1 * len(groups)
    fig, ax = plt.subplots(figsize=(11, fig_height))
    seen = set()
    for gi, g in enumerate(groups):
        members = sorted([c for c in cases if c["group"] == g], key=lambda c: impls.index(c["impl"]))
        for k, c in enumerate(members):
            y = gi + (k - (len(members) - 1) / 2) * bar
            label = c["impl"] if c["impl"] not in seen else None
            seen.add(c["impl"])
            ax.barh(y, c["pct"], height=bar * 0.9, color=color[c["impl"]], label=label)
            bound = c["bound"].replace("memory", "mem").replace("compute", "com")
            ax.text(c["pct"] + 0.5, y, f"{c['pct']:.1f}% {bound}", va="center", fontsize=6)
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups, fontsize=7)
    ax.invert_yaxis()
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlabel("% of peak: the nearer roofline, mem = copy bandwidth (CPU: @ the cache-ladder rung that holds the "
                  "case), com = compute peak; peaks measured at start-up", fontsize=8)
    ax.set_xlim(0, max(100.0, max(c["pct"] for c in cases) * 1.15))
    ax.axvline(100, color="#999", lw=0.8, ls="--")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, title="implementation")
    ax.set_title(title_of(contexts), fontsize=8, loc="left")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"bench_chart.py: {len(cases)} cases in {len(groups)} groups -> {args.output}")


if __name__ == "__main__":
    main()
