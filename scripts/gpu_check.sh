#!/usr/bin/env bash
# scripts/gpu_check.sh [OUTDIR] — the GPU acceptance run, on a machine with an NVIDIA GPU.
#
#  1. configures for this GPU's architecture (read from nvidia-smi) and builds everything;
#  2. runs every test with BRIGADE_REQUIRE_GPU=1, so a CUDA test that would skip fails instead;
#  3. runs compute-sanitizer --tool memcheck over the CUDA op test executables;
#  4. writes logs and a one-line summary (OUTDIR/summary.txt) — commit the summary under bench/results/.
# Budget: GPU_CHECK_BUDGET_S seconds (default 540: a 10-minute slot with room to spare). Every step after
# the build gets min(its own timeout, the time left); a step with under 10 s left is skipped and says so, so the
# summary is always written. New GPU checks go in the marked section, most important first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
start=$(date +%s)
jobs=$(nproc)
log() { echo "[gpu_check $(($(date +%s) - start))s] $*" | tee -a "$OUT/progress.log"; }
budget="${GPU_CHECK_BUDGET_S:-540}"
# capped N: prints min(N, seconds left before the budget, minus 10 s kept for the summary); fails (and the caller
# skips its step) when under 10 s would be left. Never prints 0: `timeout 0` would mean no limit at all.
capped() {
  local left=$((budget - ($(date +%s) - start) - 10))
  [ "$left" -ge 10 ] || return 1
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# ---- dependencies: the GPU image has CMake, ninja and nvcc but no GoogleTest/Benchmark/json/CLI11 ------------
prefix_args=()
if [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/CLI/CLI.hpp ]; then
  if ls .gpudeps/*.deb >/dev/null 2>&1; then
    deps="$PWD/.gpudeps/root"
    mkdir -p "$deps"
    for f in .gpudeps/*.deb; do dpkg-deb -x "$f" "$deps"; done
    prefix_args=(-DCMAKE_PREFIX_PATH="$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake;$deps/usr/share/cmake"
                 -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include" -DCMAKE_CUDA_FLAGS="-isystem $deps/usr/include"
                 -DGTEST_ROOT="$deps/usr")
    log "using carried Debian packages from .gpudeps"
  else
    log "WARNING: GoogleTest/nlohmann-json/CLI11 headers missing and no .gpudeps/ carried (run scripts/gpu_deps.sh)"
  fi
fi

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch="${cap:-90}"
# Compute capability 9.0 builds sm_90a code (a superset of sm_90 that runs only there): GEMM v8 (wgmma) exists only
# in it and reports itself unsupported otherwise (docs/kernels.md, v7 -> v8).
[ "$arch" = 90 ] && arch=90a
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
log "GPU: ${gpu_name:-unknown} (sm_$arch), commit $commit"

# ---- 1. configure and build -----------------------------------------------------------------------------------
build=build-gpu
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRIGADE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  "${prefix_args[@]}" > "$OUT/configure.log" 2>&1 || { log "configure FAILED"; tail -30 "$OUT/configure.log"; }
if cmake --build "$build" -j "$jobs" > "$OUT/build.log" 2>&1; then build_status=ok; else build_status=FAILED; fi
log "build $build_status"
[ "$build_status" = ok ] || tail -40 "$OUT/build.log"

# ---- 2. every test, CUDA ones must not skip ----------------------------------------------------------------------
export BRIGADE_REQUIRE_GPU=1
ctest_rc=124
if t=$(capped 300); then
  timeout "$t" ctest --test-dir "$build" -j 8 --timeout 300 --output-on-failure > "$OUT/ctest.log" 2>&1
  ctest_rc=$?
else
  log "ctest skipped: over budget"
fi
tests_line=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
skipped=$(grep -c "Skipped" "$OUT/ctest.log" || true)
log "ctest rc=$ctest_rc: $tests_line; skipped: $skipped"

# ---- 3. compute-sanitizer memcheck over the CUDA op tests ---------------------------------------------------------
memcheck_total=0
memcheck_clean=0
if command -v compute-sanitizer >/dev/null 2>&1; then
  for exe in "$build"/tests/kernels_cuda_* "$build"/tests/tensor_cuda_*; do
    [ -x "$exe" ] || continue
    memcheck_total=$((memcheck_total + 1))
    name=$(basename "$exe")
    t=$(capped 240) || { log "memcheck: $name skipped (over budget)"; continue; }
    if timeout "$t" compute-sanitizer --tool memcheck --error-exitcode 1 "$exe" > "$OUT/memcheck_$name.log" 2>&1; then
      memcheck_clean=$((memcheck_clean + 1))
    else
      log "memcheck: $name reported errors (see memcheck_$name.log)"
    fi
  done
else
  log "compute-sanitizer not found"
fi
log "memcheck clean: $memcheck_clean/$memcheck_total"

# ---- GPU checks of the features go here ----------------------------------------------------------------------------

# the default `brigade train` end to end on the GPU; it must reach >= 90% held-out accuracy. (The
# CPU-vs-CUDA loss comparison is tests/nn/cuda_train_test.cpp, run by ctest above: 20 steps, the first loss
# within 1e-5 and every loss within 2e-3 relative.)
train_cuda=FAILED
if t=$(capped 300) && timeout "$t" "$build/apps/brigade" train --device cuda --metrics "$OUT/train_cuda.json" > "$OUT/train_cuda.log" 2>&1; then
  accuracy=$(sed -n 's/^held-out exact-match accuracy: \([0-9.]*\)%.*/\1/p' "$OUT/train_cuda.log")
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 90) }' && train_cuda=ok
fi
log "brigade train --device cuda: $train_cuda; $(grep -E '^done:|^held-out' "$OUT/train_cuda.log" | tr '\n' ' ')"

# ---- pipeline CLI: brigade train as 2 stages on streams of one GPU (own timeout: 60 s) ---------------------------
# 200 steps of the default model as 1f1b, 2 stages x 4 microbatches, both stages on cuda:0 (a compute and a copy
# stream each), with the Chrome trace and the SVG timeline of a steady step in $OUT. 200 steps are too few to learn
# addition: the accuracy is recorded, not required. (The CUDA executor equivalence test,
# tests/pipeline/cuda_executor_test.cpp, ran under ctest above.)
train_pipeline=FAILED
if t=$(capped 60) && timeout "$t" "$build/apps/brigade" train --device cuda --stages 2 --microbatches 4 --steps 200 \
     --trace "$OUT/pipeline_trace.json" --timeline "$OUT/pipeline_timeline.svg" \
     --metrics "$OUT/pipeline_train.json" > "$OUT/pipeline_train.log" 2>&1 &&
   [ -s "$OUT/pipeline_trace.json" ] && [ -s "$OUT/pipeline_timeline.svg" ]; then
  train_pipeline=ok
fi
pipeline_bubble=$(sed -n 's/^bubble: measured \([0-9.]*%\).*simulated \([0-9.]*%\) from the layer.*/measured \1 simulated \2/p' "$OUT/pipeline_train.log")
pipeline_accuracy=$(sed -n 's/^held-out exact-match accuracy: \([0-9.]*%\).*/\1/p' "$OUT/pipeline_train.log")
train_pipeline_line="$train_pipeline (bubble ${pipeline_bubble:-?}, accuracy ${pipeline_accuracy:-?} after 200 steps)"
log "brigade train --device cuda --stages 2 --microbatches 4 --steps 200: $train_pipeline_line"

# ---- pipeline CLI: --devices cuda:0,cuda:0, evaluation through the pipeline (own timeout: 45 s) ----------------
# 60 steps of the default model as 2 stages given one device each (both cuda:0 here: the multi-device path with
# one GPU), with two evaluations: the validation loss and the held-out completions run through the stages as a
# forward-only schedule (Pipeline::forward). tests/pipeline/cuda_multi_device_test.cpp (ctest above) compares
# it with one device and, on a machine with two GPUs, runs cuda:0,cuda:1.
train_devices=FAILED
if t=$(capped 45) && timeout "$t" "$build/apps/brigade" train --device cuda --devices cuda:0,cuda:0 --stages 2 \
     --microbatches 4 --steps 60 --eval-every 30 --metrics "$OUT/devices_train.json" > "$OUT/devices_train.log" 2>&1 &&
   grep -q "^eval @ step 30" "$OUT/devices_train.log"; then
  train_devices=ok
fi
log "brigade train --devices cuda:0,cuda:0 --stages 2 --steps 60: $train_devices; $(grep -E '^final' "$OUT/devices_train.log")"

# ---- across processes: 2 processes on one GPU through the MPI transport (own timeout: 2 x 45 s) ----------------
# mpirun -np 2: each rank runs one stage of the default model on cuda:0, its activations and gradients crossing
# through host memory (MpiTransport, docs/distributed.md); then the same 30 steps as 2 stage threads of one
# process. The final losses must agree within 1e-5 relative. Skipped, saying so, where mpirun or the build's MPI
# (tests/dist_mpi_train_driver exists only with it) is missing.
mpi_gpu="skipped (no mpirun, or a build without MPI)"
if command -v mpirun > /dev/null && [ -x "$build/tests/dist_mpi_train_driver" ]; then
  mpi_gpu=FAILED
  mpi_args=(train --device cuda:0 --stages 2 --microbatches 4 --steps 30 --eval-every 0 --eval-iters 2)
  if t=$(capped 45) && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$t" \
       mpirun -np 2 --oversubscribe "$build/apps/brigade" "${mpi_args[@]}" --metrics "$OUT/mpi_gpu.json" \
       > "$OUT/mpi_gpu.log" 2>&1 &&
     t=$(capped 45) && timeout "$t" "$build/apps/brigade" "${mpi_args[@]}" --metrics "$OUT/mpi_gpu_threads.json" \
       > "$OUT/mpi_gpu_threads.log" 2>&1 &&
     python3 -c "import json,sys; a,b=(json.load(open(p))['final_loss'] for p in sys.argv[1:]); \
sys.exit(0 if abs(a-b) <= 1e-5*abs(b) else 1)" "$OUT/mpi_gpu.json" "$OUT/mpi_gpu_threads.json"; then
    mpi_gpu=ok
  fi
fi
log "mpirun -np 2 brigade train --device cuda:0 (one stage per process) vs 2 stage threads: $mpi_gpu"

# ---- pipeline prediction and scaling: stages as streams of one GPU (own timeouts: 20 s + 40 s) -------------------
# bench/pipeline_predict_bench --device cuda: the default pipeline run (2 stages x 4 microbatches of 32, 1f1b) with
# its layers profiled by CUDA events, simulated, then measured on cuda:0 (a compute + copy stream per stage) and
# replayed; bench/pipeline_scaling_bench --table --device cuda: S 1-8 x M 1/4/32, simulated and measured. Outputs
# in $OUT (docs/pipeline.md section 4 explains the columns). Figures are recorded, not required.
pipeline_bench=FAILED
if t=$(capped 20) && timeout "$t" "$build/bench/pipeline_predict_bench" --device cuda --steps 20 > "$OUT/pipeline_predict_cuda.txt" 2>&1 &&
   t=$(capped 40) && timeout "$t" "$build/bench/pipeline_scaling_bench" --table --device cuda --steps 3 \
     > "$OUT/pipeline_scaling_cuda.txt" 2>&1; then
  pipeline_bench=ok
fi
pipeline_gap=$(sed -n 's/^  relative difference .*: \([0-9.]*%\)$/\1/p' "$OUT/pipeline_predict_cuda.txt")
pipeline_bench_line="$pipeline_bench (default run measured vs simulated ${pipeline_gap:-?})"
log "pipeline benches on cuda: $pipeline_bench_line"

# ---- benchmarks: the kernel suites on this GPU (own timeout: 120 s) -------------------------------------------
# scripts/bench_kernels.sh runs bench/kernels_bench and bench/matmul_bench on the CUDA cases only (the peaks are
# measured at start-up: D2D copy, cuBLAS fp32/bf16 GEMM at 8192^3), 10 event-timed calls per case with the L2
# flushed before each; JSON into $OUT/bench (commit it under bench/results/), and a PNG when matplotlib is there.
bench_status=FAILED
if t=$(capped 120) && BRIGADE_BUILD_DIR="$build" BRIGADE_BENCH_FILTER=/cuda/ BRIGADE_JOBS="$jobs" timeout "$t" scripts/bench_kernels.sh "$OUT/bench" \
     > "$OUT/bench_kernels.log" 2>&1; then
  bench_status=ok
fi
bench_chart="no chart (matplotlib missing)"
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    "$py" scripts/bench_chart.py "$OUT"/bench/kernels-*.json "$OUT"/bench/matmul-*.json --device cuda \
      -o "$OUT/bench/chart_cuda.png" >> "$OUT/bench_kernels.log" 2>&1 && bench_chart="chart_cuda.png"
    break
  fi
done
log "kernel benchmarks: $bench_status ($bench_chart); $(grep -cE '^  [a-z_]+_bench: FAILED' "$OUT/bench_kernels.log" || true) failed suites"

# ---- memory-bound kernels: each version as % of the copy rate at GPT-2 shapes (own timeout: 20 s) ---------------
# No GPU time: reads the kernel bench JSON above. scripts/memory_bound_summary.py prints every CUDA version
# of the memory-bound kernels (kernels/elementwise_versions.h and adamw_versions.h v1-scalar/v2-vector128,
# cross_entropy_versions.h, embedding_backward_versions.h v1-atomic/v2-sorted) in f32 and bf16 to
# memory_bound.txt; its last line (f32, v1 -> v2) goes into the summary.
memory_bound="no result"
if t=$(capped 20) && timeout "$t" python3 scripts/memory_bound_summary.py "$OUT"/bench/kernels-*.json \
     > "$OUT/memory_bound.txt" 2>&1; then
  memory_bound=$(tail -n 1 "$OUT/memory_bound.txt")
fi
log "memory-bound kernels: $memory_bound"

# ---- CUDA kernels: racecheck over the shared-memory kernels (own timeout: 2 x 90 s) -------------------------------
# memcheck (step 3) cannot see a missing __syncthreads. compute-sanitizer racecheck runs one small test each of the
# hand-written shared-memory kernels: GEMM v3-v8 on padded/misaligned/broadcast views (kernels_cuda_matmul_test) and
# every attention version forward + backward on head-split views at D 64 and 128 in bf16 (the op table's cases,
# ops_cuda_op_table_test). docs/kernels.md.
racecheck_total=0
racecheck_clean=0
if command -v compute-sanitizer >/dev/null 2>&1; then
  for spec in kernels_cuda_matmul_test:CudaGemmKernels.PaddedMisalignedAndBroadcastOperands \
              'ops_cuda_op_table_test:Table/CudaOpTableTest.CudaMatchesReference/attention*bf16_2x77x3x3x*'; do
    name=${spec%%:*}
    [ -x "$build/tests/$name" ] || continue
    racecheck_total=$((racecheck_total + 1))
    t=$(capped 90) || { log "racecheck: $name skipped (over budget)"; continue; }
    if timeout "$t" compute-sanitizer --tool racecheck --error-exitcode 1 "$build/tests/$name" --gtest_filter="${spec#*:}" \
         > "$OUT/racecheck_$name.log" 2>&1; then
      racecheck_clean=$((racecheck_clean + 1))
    else
      log "racecheck: $name reported hazards, failed or timed out (see racecheck_$name.log)"
    fi
  done
else
  log "compute-sanitizer not found"
fi
log "racecheck clean: $racecheck_clean/$racecheck_total"

# ---- GPT-2-small step: brigade vs PyTorch on this GPU (own timeouts: 4 runs x 28 s <= 120 s) ----------------------
# One training step of a GPT-2-small-shaped model (12 layers, 12 heads, 768, T 1024, vocab 50257, batch 8):
# bench/gpt2_step_bench.cpp (brigade) and bench/gpt2_step_torch.py (PyTorch, same model and step), fp32 and bf16
# autocast; tokens/s and MFU (6 N tokens + 12 L C T tokens FLOPs; peak 989 bf16 / 67 fp32 TFLOP/s). JSON per run
# in $OUT/gpt2_step/, the lines in gpt2_step.txt. A figure, not a gate: a failed run shows in the summary.
mkdir -p "$OUT/gpt2_step"
gpt2_ok=0
gpt2_brief=""
torch_py=""
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then torch_py="$py"; break; fi
done
for dtype in bf16 fp32; do
  if t=$(capped 28) && timeout "$t" "$build/bench/gpt2_step_bench" --device cuda --dtype "$dtype" --steps 6 --warmup 2 \
       --json "$OUT/gpt2_step/brigade_$dtype.json" >> "$OUT/gpt2_step.txt" 2>&1; then gpt2_ok=$((gpt2_ok + 1)); fi
  if [ -n "$torch_py" ] && t=$(capped 28) && timeout "$t" "$torch_py" bench/gpt2_step_torch.py --device cuda --dtype "$dtype" --steps 6 \
       --warmup 2 --json "$OUT/gpt2_step/torch_$dtype.json" >> "$OUT/gpt2_step.txt" 2>&1; then gpt2_ok=$((gpt2_ok + 1)); fi
done
[ -n "$torch_py" ] || echo "no python3 with a CUDA PyTorch: torch side skipped" >> "$OUT/gpt2_step.txt"
gpt2_brief=$(sed -n 's/^impl=\([^ ]*\) .* dtype=\([^ ]*\) .* tokens_per_s=\([^ ]*\) .* mfu=\([^ ]*\) .*/\1 \2 \3 tok\/s mfu \4/p' \
  "$OUT/gpt2_step.txt" | tr '\n' ';')
log "gpt2 step: $gpt2_ok/4 runs ok: $gpt2_brief"

# ---- GEMM v8, wgmma: did v8's own kernel run and match on this GPU (own timeout: 60 s) ---------------------------
# kernels_cuda_matmul_wgmma_test: whether v8 is offered here (sm_90 + a 90a build), which calls it takes, and the
# GPT layer shapes against the double reference. ctest ran it too; this puts the answer in the summary line.
wgmma_line="not run"
if [ -x "$build/tests/kernels_cuda_matmul_wgmma_test" ]; then
  if t=$(capped 60); then
    if timeout "$t" "$build/tests/kernels_cuda_matmul_wgmma_test" > "$OUT/wgmma.log" 2>&1; then wgmma_line=passed
    else wgmma_line=FAILED; fi
    grep -q "^\[  SKIPPED \]" "$OUT/wgmma.log" && wgmma_line="$wgmma_line with skips (see wgmma.log)"
  else
    wgmma_line="skipped (over budget)"
  fi
fi
log "gemm v8 wgmma: $wgmma_line"

# ---- summary ------------------------------------------------------------------------------------------------------
elapsed=$(($(date +%s) - start))
summary="gpu_check $(date -u +%Y-%m-%dT%H:%MZ) commit $commit on ${gpu_name:-unknown} sm_$arch: build $build_status; ctest rc $ctest_rc (${tests_line:-no result}); skipped $skipped; memcheck clean $memcheck_clean/$memcheck_total; racecheck clean $racecheck_clean/$racecheck_total; train on cuda $train_cuda; pipeline train on cuda $train_pipeline_line; pipeline benches $pipeline_bench_line; benchmarks $bench_status; ${elapsed}s"
summary="$summary; gpt2 step $gpt2_ok/4 runs ($gpt2_brief)"
summary="$summary; gemm v8 wgmma $wgmma_line"
summary="$summary; train --devices cuda:0,cuda:0 $train_devices"
summary="$summary; memory-bound ($memory_bound)"
echo "$summary" | tee "$OUT/summary.txt"
[ "$build_status" = ok ] && [ "$ctest_rc" -eq 0 ] && [ "$memcheck_clean" -eq "$memcheck_total" ] && [ "$racecheck_clean" -eq "$racecheck_total" ] && [ "$train_cuda" = ok ] && [ "$train_pipeline" = ok ] && [ "$train_devices" = ok ] && [ "$bench_status" = ok ]
