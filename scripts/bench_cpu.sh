#!/usr/bin/env bash
# The CPU figures of docs/kernels.md ("CPU GEMM", "Training step against the current PyTorch", "bfloat16
# on the CPU") in one command, to re-run on a quiet machine. Each part pairs its sides in one run
# (interleaved repetitions, alternating processes) and reports medians; the load average is printed at the
# start and end of each part.
#
#   scripts/bench_cpu.sh [BUILD_DIR] [OUTDIR]        # default build/ and bench/results/
#   REPS=5 ROUNDS=7 scripts/bench_cpu.sh build-cpu
#
# 1. bench/cpu_peak_bench: the single-core peak of vfmadd231ps (ymm, zmm) and vdpbf16ps, REPS repetitions.
# 2. bench/matmul_bench, the CPU cases (the public op, every CPU version, OpenBLAS) of the baby GPT, GPT-2
#    small's layers (one 1024-token sequence) and the squares 256-4096 (FILTER), float32 and bfloat16
#    (the baby GPT and the squares up to 1024), at 1 and 2 threads:
#    REPS repetitions interleaved at random (--benchmark_enable_random_interleaving), medians; JSON and a
#    chart per thread count (scripts/bench_chart.py, with /usr/bin/python3 and python3-matplotlib).
# 3. scripts/bench_cpu_vs_torch.sh: brigade against the current PyTorch from PyPI on the baby GPT and the
#    GPT-2-small shape, 2 threads (its JSON and chart).
# 4. brigade's baby GPT step in float32 and under the bfloat16 autocast, alternating, ROUNDS each.
# 5. scripts/bench_row_ops_vs_torch.sh: every CPU row op, attention, embedding and AdamW against PyTorch's
#    ATen op at the baby GPT's and GPT-2 small's sizes, one thread, ROW_ROUNDS rounds (default 3, about
#    6 minutes a round).
# Needs the build's bench targets (cmake --build BUILD_DIR --target cpu_peak_bench matmul_bench
# train_step_bench kernels_bench) and, for parts 3 and 5, network access the first time
# (scripts/torch_venv.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
OUT="${2:-$ROOT/bench/results}"
REPS="${REPS:-3}"
ROUNDS="${ROUNDS:-5}"
MIN_TIME="${MIN_TIME:-0.1}"
# The baby GPT's products, GPT-2 small's layer products (one 1024-token sequence) and the squares.
FILTER="${FILTER:-matmul\.[a-z_]+/baby/.*/cpu/|matmul\.(qkv|attn_proj|fc|fc_proj)/gpt2-b1/.*/cpu/|matmul\.square[0-9]+/square/.*/cpu/}"
mkdir -p "$OUT"
# commit, cpu, stamp, machine: the results file name
source "$ROOT/scripts/result_name.sh"
load() { echo "# $1: $(date -u +%H:%M:%S) load average $(cut -d' ' -f1-3 /proc/loadavg)"; }
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

load "peak, start"
"$BUILD_DIR/bench/cpu_peak_bench" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/cpu-peak-$stamp-$commit-$machine.json" --benchmark_out_format=json | grep -E "median|peak"
load "peak, end"

for threads in 1 2; do
  json="$OUT/matmul-cpu-$stamp-$commit-$machine-omp$threads.json"
  load "matmul_bench, $threads thread(s), start"
  OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive BRIGADE_COMMIT="$commit" "$BUILD_DIR/bench/matmul_bench" \
    --benchmark_filter="$FILTER" --benchmark_repetitions="$REPS" \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
    --benchmark_min_time="$MIN_TIME" --benchmark_out="$json" --benchmark_out_format=json >"$json.log" 2>&1
  load "matmul_bench, $threads thread(s), end"
  "$PY" "$ROOT/scripts/bench_chart.py" "$json" -o "${json%.json}.png" || true
  "$PY" "$ROOT/scripts/bench_chart.py" "$json" --markdown | grep -E "square|baby|gpt2" || true
done

load "training step vs PyTorch, start"
ROUNDS="$ROUNDS" TORCH="${TORCH:-pypi}" OUT_DIR="$OUT" "$ROOT/scripts/bench_cpu_vs_torch.sh" "$BUILD_DIR"
load "training step vs PyTorch, end"

load "bf16 vs fp32 step, start"
args=(--step-median --layers 4 --embd 128 --heads 4 --block 64 --batch 12 --vocab 65 --threads 2 --steps 20)
for ((r = 0; r < ROUNDS; ++r)); do
  for bf16 in 0 1; do
    printf 'bf16=%s ' "$bf16"
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive "$BUILD_DIR/bench/train_step_bench" "${args[@]}" --bf16 "$bf16"
  done
done | tee "$OUT/bf16-step-$stamp-$commit-$machine.txt" | "$PY" -c '
import statistics, sys
rows = [line.split() for line in sys.stdin if line.startswith("bf16=")]
med = lambda bf16, col: statistics.median(float(r[col]) for r in rows if r[0] == "bf16=" + bf16)
wall32, wall16, cpu32, cpu16 = med("0", 4), med("1", 4), med("0", -1), med("1", -1)
print(f"baby GPT, 2 threads: fp32 {wall32:.2f} ms/step (cpu {cpu32:.2f}), bf16 autocast {wall16:.2f} ms/step "
      f"(cpu {cpu16:.2f}): bf16 / fp32 = {wall16 / wall32:.3f} wall, {cpu16 / cpu32:.3f} cpu")'
load "bf16 vs fp32 step, end"

load "row ops vs PyTorch, start"
ROUNDS="${ROW_ROUNDS:-3}" OUT_DIR="$OUT" "$ROOT/scripts/bench_row_ops_vs_torch.sh" "$BUILD_DIR"
load "row ops vs PyTorch, end"
