#!/usr/bin/env python3
"""Summarises a run of scripts/bench_cpu_vs_torch.sh: prints the table of medians and ratios, writes the
results JSON (every raw figure, the medians, the load averages, the machine and the versions) and, where
matplotlib is importable, a chart of ms/step per side.

  scripts/cpu_vs_torch_summary.py RAW.tsv --json OUT.json [--chart OUT.png]
  scripts/cpu_vs_torch_summary.py --from-json bench/results/cpu-vs-torch-X.json --markdown   # the doc table
  scripts/cpu_vs_torch_summary.py --from-json bench/results/cpu-vs-torch-X.json --chart X.png   # redraw its chart

RAW.tsv lines (tab-separated), written by the shell script:
  meta  KEY  VALUE
  row   SHAPE  THREADS  SIDE  ROUND  WALL_MS  CPU_MS  LOAD1      (SIDE: brigade, torch-pypi, torch-debian,
                                                            brigade-baseline)
Only the standard library is needed, matplotlib for the chart.
"""

import argparse
import json
import statistics
import sys


def parse(path):
    meta, rows = {}, []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "meta":
                meta[parts[1]] = parts[2]
            elif parts[0] == "row":
                shape, threads, side, rnd, wall, cpu, load = parts[1:8]
                rows.append({"shape": shape, "threads": int(threads), "side": side, "round": int(rnd),
                             "wall_ms": float(wall), "cpu_ms": float(cpu), "load1": float(load)})
    return meta, rows


def summarise(rows):
    """One entry per (shape, threads, other side: a PyTorch or brigade-baseline): medians of both sides and the
    ratios brigade / other."""
    out = []
    keys = sorted({(r["shape"], r["threads"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for shape, threads in keys:
        sel = [r for r in rows if r["shape"] == shape and r["threads"] == threads]
        mine = {r["round"]: r for r in sel if r["side"] == "brigade"}
        for side in sorted({r["side"] for r in sel if r["side"] != "brigade"}):
            theirs = {r["round"]: r for r in sel if r["side"] == side}
            rounds = sorted(set(mine) & set(theirs))
            bw = statistics.median(mine[i]["wall_ms"] for i in rounds)
            tw = statistics.median(theirs[i]["wall_ms"] for i in rounds)
            bc = statistics.median(mine[i]["cpu_ms"] for i in rounds)
            tc = statistics.median(theirs[i]["cpu_ms"] for i in rounds)
            paired = statistics.median(mine[i]["wall_ms"] / theirs[i]["wall_ms"] for i in rounds)
            ratios = [mine[i]["wall_ms"] / theirs[i]["wall_ms"] for i in rounds]
            out.append({"shape": shape, "threads": threads, "torch": side, "rounds": len(rounds),
                        "brigade_wall_ms": bw, "torch_wall_ms": tw, "ratio": bw / tw, "paired_ratio": paired,
                        "ratio_min": min(ratios), "ratio_max": max(ratios),
                        "brigade_cpu_ms": bc, "torch_cpu_ms": tc, "cpu_ratio": bc / tc,
                        "load1_median": statistics.median(mine[i]["load1"] for i in rounds)})
    return out


def markdown(summary):
    lines = ["| shape | threads | PyTorch | brigade ms | torch ms | ratio | paired (min–max) | brigade cpu ms | "
             "torch cpu ms | cpu ratio | load |",
             "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for s in summary:
        lines.append(f"| {s['shape']} | {s['threads']} | {s['torch']} | {s['brigade_wall_ms']:.2f} | "
                     f"{s['torch_wall_ms']:.2f} | **{s['ratio']:.3f}** | {s['paired_ratio']:.3f} "
                     f"({s['ratio_min']:.2f}–{s['ratio_max']:.2f}) | {s['brigade_cpu_ms']:.2f} | "
                     f"{s['torch_cpu_ms']:.2f} | {s['cpu_ratio']:.3f} | {s['load1_median']:.1f} |")
    return "\n".join(lines)


def chart(summary, meta, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"# chart skipped: matplotlib is not importable (apt-get install python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(summary) + 1.8))
    labels = [f"{s['shape']} / {s['threads']} thr / vs {s['torch']}" for s in summary]
    y = range(len(summary))
    ax.barh([i + 0.2 for i in y], [s["ratio"] for s in summary], height=0.4, label="wall-time ratio")
    ax.barh([i - 0.2 for i in y], [s["cpu_ratio"] for s in summary], height=0.4, label="CPU-time ratio")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels)
    ax.set_xlabel("brigade time / the other side's time per training step (below 1: brigade faster)")
    variant = f", dropout {meta['dropout_percent']} %" if "dropout_percent" in meta else ""
    variant += ", bf16 autocast" if "bf16" in meta else ""
    ax.set_title(f"brigade vs PyTorch, CPU training step{variant}\n{meta.get('date', '')} {meta.get('commit', '')} "
                 f"{meta.get('cpu', '')}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"# chart: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", nargs="?")
    parser.add_argument("--json")
    parser.add_argument("--chart")
    parser.add_argument("--from-json")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.from_json:
        doc = json.load(open(args.from_json))
        print(markdown(doc["summary"]))
        if args.chart:  # redraw a committed run's chart (where matplotlib was missing when it ran)
            chart(doc["summary"], doc.get("context", {}), args.chart)
        return 0
    meta, rows = parse(args.raw)
    summary = summarise(rows)
    print(markdown(summary))
    print(f"# load average: start {meta.get('load_start', '?')}, end {meta.get('load_end', '?')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"context": meta, "summary": summary, "rows": rows}, f, indent=1)
        print(f"# results: {args.json}")
    if args.chart:
        chart(summary, meta, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
