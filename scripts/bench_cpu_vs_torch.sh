#!/usr/bin/env bash
# brigade's CPU training step against PyTorch's CPU eager mode, same model, batch, step and thread count,
# measured in one run: the two alternate (brigade, torch, brigade, torch, ...) so that a machine whose load
# drifts hurts both alike, and the script prints each side's median ms/step and the ratio brigade / torch
# (below 1: brigade is faster).
#
#   scripts/bench_cpu_vs_torch.sh [BUILD_DIR]          # default build/; needs its bench/train_step_bench
#   ROUNDS=5 STEPS=20 THREADS="1 2" scripts/bench_cpu_vs_torch.sh build-cpu
#
# Shapes (brigade side: bench/train_step_bench --step-median; torch side: bench/torch_train_step.py):
#   default  the default `brigade train` model: 2 layers, 4 heads, n_embd 64, block 13, batch 128, vocab 13
#   larger   a Shakespeare-sized small GPT:      4 layers, 4 heads, n_embd 128, block 64, batch 16, vocab 65
# Each round runs each side once (a fresh process: warm-up steps, then STEPS timed steps, its median); the
# printed figure per side is the median over ROUNDS of those medians, "ratio" their quotient and "paired"
# the median over rounds of the per-round ratio. Wall time is the figure that counts (what a training run
# waits for); the CPU-time columns (all of a process's threads, per step) are printed beside it because a
# machine shared with other work inflates wall time far more than CPU time. PyTorch runs with torch.set_num_threads(T) and OMP_NUM_THREADS=T, brigade
# with omp_set_num_threads(T); both with OMP_WAIT_POLICY=passive, as `brigade train` is run on a shared box.
#
# Needs Debian's python3-torch (/usr/bin/python3 -c 'import torch'); without it the script says so and
# exits 0. PyTorch's matmuls go through whatever libblas.so.3 is installed: the script prints which (the
# fair comparison is against OpenBLAS: scripts/install_deps.sh --torch installs both; Debian's
# fallback, the netlib reference BLAS, is many times slower and would flatter brigade).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
ROUNDS="${ROUNDS:-5}"
STEPS="${STEPS:-20}"
WARMUP="${WARMUP:-3}"
THREADS="${THREADS:-1 2}"
PYTHON="${PYTHON:-/usr/bin/python3}"
BRIGADE="$BUILD_DIR/bench/train_step_bench"
TORCH_SCRIPT="$ROOT/bench/torch_train_step.py"

if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  echo "bench_cpu_vs_torch: skipped: PyTorch is not importable by $PYTHON (scripts/install_deps.sh --torch installs it)"
  exit 0
fi
if [[ ! -x "$BRIGADE" ]]; then
  echo "bench_cpu_vs_torch: $BRIGADE not found; build it first:" >&2
  echo "  cmake --build $BUILD_DIR --target train_step_bench" >&2
  exit 1
fi

blas="$("$PYTHON" - <<'EOF'
import os, re, torch
lib = [l.split()[-1] for l in open("/proc/self/maps") if re.search(r"libblas\.so|openblas", l)]
print(os.path.realpath(lib[0]) if lib else "unknown")
EOF
)"
echo "# brigade vs PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)') (CPU eager), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "# PyTorch BLAS: $blas"
case "$blas" in *openblas*) ;; *) echo "# WARNING: PyTorch is not using OpenBLAS here; its GEMMs are slow and the ratio flatters brigade" ;; esac
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg); rounds $ROUNDS x $STEPS timed steps (+$WARMUP warm-up) per side"

# name layers embd heads block batch vocab
SHAPES=("default 2 64 4 13 128 13" "larger 4 128 4 64 16 65")

median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '%-8s %-7s %11s %11s %7s %7s %11s %11s %7s\n' shape threads "brigade ms" "torch ms" ratio paired \
  "brig cpu ms" "torch cpu" "cpu rat"
for shape in "${SHAPES[@]}"; do
  read -r name layers embd heads block batch vocab <<<"$shape"
  args=(--layers "$layers" --embd "$embd" --heads "$heads" --block "$block" --batch "$batch" --vocab "$vocab"
        --steps "$STEPS" --warmup "$WARMUP")
  for t in $THREADS; do
    b_list=() t_list=() r_list=() bc_list=() tc_list=()
    for ((r = 0; r < ROUNDS; ++r)); do
      read -r b bc < <(OMP_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$BRIGADE" --step-median "${args[@]}" --threads "$t" \
                       | awk '{print $4, $NF}')
      read -r p pc < <(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OMP_WAIT_POLICY=passive "$PYTHON" "$TORCH_SCRIPT" \
                       "${args[@]}" --threads "$t" | awk '{print $4, $NF}')
      b_list+=("$b") t_list+=("$p") bc_list+=("$bc") tc_list+=("$pc")
      r_list+=("$(awk -v a="$b" -v c="$p" 'BEGIN {printf "%.4f", a / c}')")
    done
    bm=$(printf '%s\n' "${b_list[@]}" | median)
    tm=$(printf '%s\n' "${t_list[@]}" | median)
    pr=$(printf '%s\n' "${r_list[@]}" | median)
    bcm=$(printf '%s\n' "${bc_list[@]}" | median)
    tcm=$(printf '%s\n' "${tc_list[@]}" | median)
    printf '%-8s %-7s %11.2f %11.2f %7.3f %7.3f %11.2f %11.2f %7.3f\n' "$name" "$t" "$bm" "$tm" \
      "$(awk -v a="$bm" -v c="$tm" 'BEGIN {print a / c}')" "$pr" "$bcm" "$tcm" \
      "$(awk -v a="$bcm" -v c="$tcm" 'BEGIN {print a / c}')"
  done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
