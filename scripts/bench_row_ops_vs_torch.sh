#!/usr/bin/env bash
# brigade's CPU kernels against PyTorch's, one op at a time: bench/kernels_bench's CPU float32 cases and
# the ATen ops a PyTorch model reaches for them (bench/torch_row_ops.py), at the same shapes, on one thread
# by default. The sides alternate for ROUNDS rounds (brigade, torch, brigade, ...), so that a machine whose
# load drifts hurts them alike; the summary (scripts/row_ops_vs_torch_summary.py) prints each case's median
# over the rounds on both sides and their ratio (brigade / torch: below 1, brigade is faster), and writes
# every round's figures to bench/results/row-ops-vs-torch-<date>-<commit>-<machine>.json.
#
#   scripts/bench_row_ops_vs_torch.sh [BUILD_DIR]          # default build/; needs its bench/kernels_bench
#   ROUNDS=3 THREADS=1 MODELS=char128,gpt2-b1 scripts/bench_row_ops_vs_torch.sh build-cpu
#
# PyTorch is the current one from PyPI, in the environment scripts/torch_venv.sh makes once. Each side
# repeats each case for MIN_TIME seconds, REPETITIONS times, and keeps the median (Google Benchmark's
# --benchmark_min_time and --benchmark_repetitions on brigade's side). The gpt2-b1 cases take about a
# minute a side and a round.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-1}"
MODELS="${MODELS:-char128,gpt2-b1}"
MIN_TIME="${MIN_TIME:-0.2}"
REPETITIONS="${REPETITIONS:-3}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/results}"
BRIGADE="$BUILD_DIR/bench/kernels_bench"
OPS='softmax_fwd.attn|softmax_bwd.attn|log_softmax_fwd.logits|log_softmax_bwd.logits|cross_entropy|cross_entropy_nograd|layernorm_fwd|layernorm_bwd|gelu_fwd|gelu_bwd|attention_fwd|attention_bwd|embedding_fwd|embedding_bwd|adamw|unary_exp|unary_log|unary_sqrt|unary_rsqrt|unary_tanh|unary_sigmoid|masked_fill.attn|sum_rows.bias_grad|sum_last|mean_last|max_last.logits|argmax.logits|dropout|global_l2_norm'

if [[ ! -x "$BRIGADE" ]]; then
  echo "bench_row_ops_vs_torch: $BRIGADE not found; build it first:" >&2
  echo "  cmake --build $BUILD_DIR --target kernels_bench" >&2
  exit 1
fi
PY="$("$ROOT/scripts/torch_venv.sh")"

# commit, cpu, stamp, machine: the results file name
source "$ROOT/scripts/result_name.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "# $cpu ($(nproc) cores), commit $commit, $THREADS thread(s), load $(cut -d' ' -f1-3 /proc/loadavg)"
models_regex="${MODELS//,/|}"
for round in $(seq 1 "$ROUNDS"); do
  OMP_NUM_THREADS="$THREADS" "$BRIGADE" --benchmark_min_time="$MIN_TIME" --benchmark_repetitions="$REPETITIONS" \
    --benchmark_report_aggregates_only=true --benchmark_filter="^($OPS)/($models_regex)/f32/cpu/" \
    --benchmark_out="$work/brigade-$round.json" --benchmark_out_format=json >"$work/brigade.log" 2>&1 ||
    { cat "$work/brigade.log" >&2; exit 1; }
  OMP_NUM_THREADS="$THREADS" "$PY" "$ROOT/bench/torch_row_ops.py" --models "$MODELS" --threads "$THREADS" \
    --min-time "$MIN_TIME" --repetitions "$REPETITIONS" --filter "^($OPS)/" --out "$work/torch-$round.json" >/dev/null
  echo "# round $round of $ROUNDS done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
mkdir -p "$OUT_DIR"
python3 "$ROOT/scripts/row_ops_vs_torch_summary.py" --brigade "$work"/brigade-*.json --torch "$work"/torch-*.json \
  --meta "date=$(date -u +%Y-%m-%dT%H:%MZ)" "commit=$commit" "cpu=$cpu" "threads=$THREADS" \
  --json "$OUT_DIR/row-ops-vs-torch-$stamp-$commit-$machine.json"
