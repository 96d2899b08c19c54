#!/usr/bin/env bash
# brigade's CPU training step against PyTorch's CPU eager mode: same model, batch, step and thread count,
# measured in one run. The sides alternate (brigade, torch, brigade, torch, ...) so that a machine whose
# load drifts hurts them alike; the script prints each side's median ms/step and the ratio brigade / torch
# (below 1: brigade is faster), and writes every raw figure, the medians and the load averages to
# bench/results/cpu-vs-torch-<date>-<commit>-<machine>.json with a chart beside it.
#
#   scripts/bench_cpu_vs_torch.sh [BUILD_DIR]           # default build/; needs its bench/train_step_bench
#   ROUNDS=7 THREADS="1 2" SHAPES="baby" TORCH=pypi scripts/bench_cpu_vs_torch.sh build-cpu
#   BASELINE=../other/build-cpu scripts/bench_cpu_vs_torch.sh build-cpu   # also an earlier brigade build
#
# BASELINE (optional) names a second brigade build directory (another commit's train_step_bench): it runs
# as one more side, "brigade-baseline", in the same alternation, so that the table gives this build's time
# over the baseline's beside the ratios to PyTorch. TORCH="" with a BASELINE compares the two builds alone.
#
# PyTorch sides (TORCH, default "pypi debian"):
#   pypi    the current PyTorch from PyPI (MKL, oneDNN), in the virtual environment scripts/torch_venv.sh
#           makes once (~/.cache/brigade/torch-venv); attention through F.scaled_dot_product_attention
#           (its fused CPU kernel), as a user of PyTorch 2 writes it
#   debian  Debian's python3-torch (1.13, on whatever libblas.so.3 is installed: the script prints which;
#           scripts/install_deps.sh --torch installs it with OpenBLAS); eager attention (1.13 has no
#           fused CPU attention). Skipped with a note where /usr/bin/python3 cannot import torch.
# Shapes (SHAPES, default "baby gpt2s"; brigade side bench/train_step_bench --step-median, torch side
# bench/torch_train_step.py):
#   baby     the baby GPT: 4 layers, 4 heads, n_embd 128, block 64, batch 12, vocab 65 (characters)
#   gpt2s    GPT-2-small-shaped: 12 layers, 12 heads, n_embd 768, block 256, batch 4, vocab 50257
#   default  the default `brigade train` model: 2 layers, 4 heads, n_embd 64, block 13, batch 128, vocab 13
#   larger   4 layers, 4 heads, n_embd 128, block 64, batch 16, vocab 65
# Each round runs each side once (a fresh process: WARMUP steps, then STEPS timed steps, its median; gpt2s
# takes STEPS_GPT2S / WARMUP_GPT2S / ROUNDS_GPT2S, default 3 / 1 / 3, since one step takes seconds); the
# printed figure per side is the median over ROUNDS (default 5) of those medians, "ratio" their quotient and "paired" the
# median over rounds of the per-round ratio. Wall time is the figure that counts (what a training run
# waits for); CPU time (all of a process's threads, per step) is printed beside it because a machine
# shared with other work inflates wall time far more than CPU time. Both sides get THREADS threads
# (default "2"): torch.set_num_threads and OMP_NUM_THREADS for PyTorch, --threads for brigade; both with
# OMP_WAIT_POLICY=passive, as on a shared machine. DROPOUT_PERCENT (default 0) trains both sides' GPTs with
# that dropout (embeddings, attention weights, residual branches; a BASELINE build must know the flag).
# BF16=1 runs both sides under bf16 autocast (brigade's --bf16 1, PyTorch's torch.autocast("cpu",
# dtype=torch.bfloat16)); Debian's PyTorch 1.13 has CPU autocast too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
ROUNDS="${ROUNDS:-5}"
STEPS="${STEPS:-20}"
WARMUP="${WARMUP:-3}"
STEPS_GPT2S="${STEPS_GPT2S:-3}"
ROUNDS_GPT2S="${ROUNDS_GPT2S:-3}"
WARMUP_GPT2S="${WARMUP_GPT2S:-1}"
THREADS="${THREADS:-2}"
DROPOUT_PERCENT="${DROPOUT_PERCENT:-0}"
BF16="${BF16:-0}"
[[ "$BF16" == 0 || "$BF16" == 1 ]] || { echo "usage: BF16 is 0 or 1, found '$BF16'" >&2; exit 2; }
SHAPES="${SHAPES:-baby gpt2s}"
TORCH="${TORCH:-pypi debian}"
OUT_DIR="${OUT_DIR:-$ROOT/bench/results}"
BRIGADE="$BUILD_DIR/bench/train_step_bench"
TORCH_SCRIPT="$ROOT/bench/torch_train_step.py"

if [[ ! -x "$BRIGADE" ]]; then
  echo "bench_cpu_vs_torch: $BRIGADE not found; build it first:" >&2
  echo "  cmake --build $BUILD_DIR --target train_step_bench" >&2
  exit 1
fi

# The PyTorch sides that run here, as name=python.
sides=()
for side in $TORCH; do
  case "$side" in
    pypi) sides+=("pypi=$("$ROOT/scripts/torch_venv.sh")") ;;
    debian)
      if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
        sides+=("debian=/usr/bin/python3")
      else
        echo "# debian: skipped: /usr/bin/python3 cannot import torch (scripts/install_deps.sh --torch installs it)"
      fi ;;
    *) echo "usage: TORCH lists pypi and/or debian, found '$side'" >&2; exit 2 ;;
  esac
done
BASELINE_BENCH=""
if [[ -n "${BASELINE:-}" ]]; then
  BASELINE_BENCH="$BASELINE/bench/train_step_bench"
  [[ -x "$BASELINE_BENCH" ]] || { echo "bench_cpu_vs_torch: BASELINE: $BASELINE_BENCH not found" >&2; exit 1; }
fi
[[ ${#sides[@]} -gt 0 || -n "$BASELINE_BENCH" ]] || { echo "bench_cpu_vs_torch: nothing to compare against" >&2; exit 1; }

# commit, cpu, stamp, machine: the results file name
source "$ROOT/scripts/result_name.sh"
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
printf 'meta\tdate\t%s\nmeta\tcommit\t%s\nmeta\tcpu\t%s (%s cores)\nmeta\tbrigade\t%s\nmeta\tload_start\t%s\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$commit" "$cpu" "$(nproc)" "$("$BRIGADE" --cpu-info)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
for entry in "${sides[@]}"; do
  name="${entry%%=*}" python="${entry#*=}"
  info="$("$python" -c 'import torch; print(torch.__version__, "MKL" if torch.backends.mkl.is_available() else "no MKL")' 2>/dev/null)"
  if [[ "$name" == debian ]]; then
    info="$info, BLAS $("$python" -c 'import os, re, torch; l = [x.split()[-1] for x in open("/proc/self/maps") if re.search(r"libblas\.so|openblas", x)]; print(os.path.realpath(l[0]) if l else "unknown")')"
  fi
  printf 'meta\ttorch-%s\t%s\n' "$name" "$info" >>"$raw"
done
[[ -z "$BASELINE_BENCH" ]] || printf 'meta\tbaseline\t%s\n' "$(cd "$BASELINE" && pwd)" >>"$raw"
[[ "$DROPOUT_PERCENT" == 0 ]] || printf 'meta\tdropout_percent\t%s\n' "$DROPOUT_PERCENT" >>"$raw"
[[ "$BF16" == 0 ]] || printf 'meta\tbf16\t%s\n' "autocast" >>"$raw"
sed -n 's/^meta\t\([^\t]*\)\t/# \1: /p' "$raw"

# name: layers embd heads block batch vocab
declare -A SHAPE_ARGS=(
  [baby]="4 128 4 64 12 65" [gpt2s]="12 768 12 256 4 50257"
  [default]="2 64 4 13 128 13" [larger]="4 128 4 64 16 65")

for shape in $SHAPES; do
  [[ -n "${SHAPE_ARGS[$shape]:-}" ]] || { echo "usage: unknown shape '$shape' (baby gpt2s default larger)" >&2; exit 2; }
  read -r layers embd heads block batch vocab <<<"${SHAPE_ARGS[$shape]}"
  steps=$STEPS warmup=$WARMUP rounds=$ROUNDS
  if [[ "$shape" == gpt2s ]]; then steps=$STEPS_GPT2S warmup=$WARMUP_GPT2S rounds=$ROUNDS_GPT2S; fi
  args=(--layers "$layers" --embd "$embd" --heads "$heads" --block "$block" --batch "$batch" --vocab "$vocab"
        --steps "$steps" --warmup "$warmup")
  if [[ "$DROPOUT_PERCENT" != 0 ]]; then args+=(--dropout-percent "$DROPOUT_PERCENT"); fi
  if [[ "$BF16" != 0 ]]; then args+=(--bf16 1); fi
  for t in $THREADS; do
    for ((r = 0; r < rounds; ++r)); do
      load="$(cut -d' ' -f1 /proc/loadavg)"
      read -r b bc < <(OMP_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$BRIGADE" --step-median "${args[@]}" --threads "$t" \
                       | awk '{print $4, $NF}')
      printf 'row\t%s\t%s\tbrigade\t%s\t%s\t%s\t%s\n' "$shape" "$t" "$r" "$b" "$bc" "$load" >>"$raw"
      if [[ -n "$BASELINE_BENCH" ]]; then
        read -r b bc < <(OMP_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$BASELINE_BENCH" --step-median "${args[@]}" \
                         --threads "$t" | awk '{print $4, $NF}')
        printf 'row\t%s\t%s\tbrigade-baseline\t%s\t%s\t%s\t%s\n' "$shape" "$t" "$r" "$b" "$bc" "$load" >>"$raw"
      fi
      for entry in "${sides[@]}"; do
        name="${entry%%=*}" python="${entry#*=}"
        attention=eager
        if [[ "$name" == pypi ]]; then attention=sdpa; fi
        read -r p pc < <(OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OMP_WAIT_POLICY=passive \
                         "$python" "$TORCH_SCRIPT" "${args[@]}" --threads "$t" --attention "$attention" \
                         | awk '{print $4, $NF}')
        printf 'row\t%s\t%s\ttorch-%s\t%s\t%s\t%s\t%s\n' "$shape" "$t" "$name" "$r" "$p" "$pc" "$load" >>"$raw"
      done
    done
  done
done
printf 'meta\tload_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
mkdir -p "$OUT_DIR"
PY=/usr/bin/python3; [[ -x $PY ]] || PY=python3
"$PY" "$ROOT/scripts/cpu_vs_torch_summary.py" "$raw" --json "$OUT_DIR/cpu-vs-torch-$stamp-$commit-$machine.json" \
  --chart "$OUT_DIR/chart-cpu-vs-torch-$stamp-$commit-$machine.png"
