#!/usr/bin/env bash
# scripts/gpu_check.sh [OUTDIR] — the GPU acceptance run, on a machine with an NVIDIA GPU.
#
#  1. configures for this GPU's architecture (read from nvidia-smi) and builds everything;
#  2. runs every test with BRIGADE_REQUIRE_GPU=1, so a CUDA test that would skip fails instead;
#  3. runs compute-sanitizer --tool memcheck over the CUDA op test executables;
#  4. writes logs and a one-line summary (OUTDIR/summary.txt) — commit the summary under bench/results/.
# Budget: GPU_CHECK_BUDGET_S seconds (default 540: a 10-minute slot with room to spare). Every step, the build
# too, gets min(its own timeout, the time left); a step with under 10 s left is skipped and says so, so the
# summary is always written. Two phases after the build: the checks of correctness run side by side (timings do
# not matter there; the GPU and 16 cores have room), then the measurements run one at a time on a quiet GPU.
# New GPU checks go in the marked sections, most important first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
start=$(date +%s)
jobs=$(nproc)
# The commit: BRIGADE_COMMIT where the caller says (a copy of the working tree may carry a stale .git), else git's.
commit="${BRIGADE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
export BRIGADE_COMMIT="$commit"
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
log "GPU: ${gpu_name:-unknown} (sm_$arch), commit $commit; $(nvcc --version 2>/dev/null | tail -1); $(c++ --version 2>/dev/null | head -1); $(cmake --version | head -1)"

# ---- 1. configure and build (own timeout: 330 s) -------------------------------------------------------------------
build=build-gpu
build_status=FAILED
if t=$(capped 330); then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRIGADE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    "${prefix_args[@]}" > "$OUT/configure.log" 2>&1 || { log "configure FAILED"; tail -30 "$OUT/configure.log"; }
  t=$(capped 330) && timeout "$t" cmake --build "$build" -j "$jobs" > "$OUT/build.log" 2>&1 && build_status=ok
fi
log "build $build_status"
[ "$build_status" = ok ] || tail -40 "$OUT/build.log"

# ---- 2. the checks of correctness, side by side -----------------------------------------------------------------
# Each writes its result to $OUT/result_<name>.txt (a background job cannot set the caller's variables).
export BRIGADE_REQUIRE_GPU=1  # a CUDA test that would skip fails instead
result() { echo "$2" > "$OUT/result_$1.txt"; }
read_result() { cat "$OUT/result_$1.txt" 2>/dev/null || echo "not run"; }

check_ctest() {  # every test (own timeout: 300 s)
  local rc=124 t
  if t=$(capped 300); then
    timeout "$t" ctest --test-dir "$build" -j 8 --timeout 240 --output-on-failure > "$OUT/ctest.log" 2>&1
    rc=$?
  fi
  local line skipped
  line=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" 2>/dev/null | tail -1)
  skipped=$(grep -c "Skipped" "$OUT/ctest.log" 2>/dev/null || true)
  result ctest "rc $rc (${line:-no result}); skipped ${skipped:-0}"
  log "ctest rc=$rc: $line; skipped: $skipped"
}

sanitize_one() {  # sanitize_one TOOL EXE [GTEST_FILTER]: compute-sanitizer over one test executable
  local tool=$1 exe=$2 filter=${3:-*} name t rc
  name=$(basename "$exe")
  t=$(capped 200) || { echo "$name: skipped (over budget)"; return 1; }
  timeout "$t" compute-sanitizer --tool "$tool" --error-exitcode 1 "$exe" --gtest_filter="$filter" \
    > "$OUT/${tool}_$name.log" 2>&1
  rc=$?
  # A test executable whose tests make no CUDA call (a table of names, say) leaves the tool nothing to check.
  if [ "$rc" -ne 0 ] && grep -q "terminated before first instrumented API call" "$OUT/${tool}_$name.log" &&
     grep -q "^\[  PASSED  \]" "$OUT/${tool}_$name.log" && ! grep -q "^\[  FAILED  \]" "$OUT/${tool}_$name.log"; then
    echo "$name: clean (no CUDA call)"
    return 0
  fi
  case $rc in
    0) echo "$name: clean" ;;
    124) echo "$name: TIMED OUT (see ${tool}_$name.log)"; return 1 ;;
    *) echo "$name: errors or failed tests, exit $rc (see ${tool}_$name.log)"; return 1 ;;
  esac
}

# sanitize_all TOOL EXE:FILTER...: compute-sanitizer TOOL over each test executable (with its gtest filter), all
# at once; the result is "clean/total".
sanitize_all() {
  local tool=$1 spec pids=() total=0 clean=0 pid
  shift
  command -v compute-sanitizer >/dev/null 2>&1 || { result "$tool" "compute-sanitizer not found"; return; }
  for spec in "$@"; do
    [ -x "${spec%%:*}" ] || continue
    total=$((total + 1))
    sanitize_one "$tool" "${spec%%:*}" "${spec#*:}" >> "$OUT/$tool.txt" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" && clean=$((clean + 1)); done
  result "$tool" "$clean/$total"
  log "$tool clean: $clean/$total; $(grep -v ': clean' "$OUT/$tool.txt" 2>/dev/null | tr '\n' ' ')"
}

check_memcheck() {  # memcheck over the CUDA op test executables
  local exe specs=()
  for exe in "$build"/tests/kernels_cuda_* "$build"/tests/tensor_cuda_*; do
    # The out-of-memory test asks cudaMalloc for 1 PiB on purpose: memcheck would report that API error.
    if [ "$(basename "$exe")" = tensor_cuda_tensor_test ]; then specs+=("$exe:-CudaTensor.OutOfMemory*")
    else specs+=("$exe:*"); fi
  done
  sanitize_all memcheck "${specs[@]}"
}

# memcheck cannot see a missing __syncthreads. racecheck runs one small test each of the hand-written
# shared-memory kernels: GEMM v3-v8 on padded/misaligned/broadcast views (kernels_cuda_matmul_test) and every
# attention version forward + backward on head-split views at D 64 and 128 in bf16 (the op table's cases,
# ops_cuda_op_table_test). docs/kernels.md.
check_racecheck() {
  sanitize_all racecheck "$build/tests/kernels_cuda_matmul_test:CudaGemmKernels.PaddedMisalignedAndBroadcastOperands" \
    "$build/tests/ops_cuda_op_table_test:Table/CudaOpTableTest.CudaMatchesReference/attention*bf16_2x77x3x3x*"
}

# the default `brigade train` end to end on the GPU; it must reach >= 90% held-out accuracy. (The CPU-vs-CUDA
# loss comparison is tests/nn/cuda_train_test.cpp, run by ctest: 20 steps, the first loss within 1e-5 and every
# loss within 2e-3 relative.) Own timeout: 300 s.
check_train_cuda() {
  local status=FAILED t accuracy
  if t=$(capped 300) && timeout "$t" "$build/apps/brigade" train --device cuda --metrics "$OUT/train_cuda.json" \
       > "$OUT/train_cuda.log" 2>&1; then
    accuracy=$(sed -n 's/^held-out exact-match accuracy: \([0-9.]*\)%.*/\1/p' "$OUT/train_cuda.log")
    awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 90) }' && status=ok
  fi
  result train_cuda "$status"
  log "brigade train --device cuda: $status; $(grep -E '^done:|^held-out' "$OUT/train_cuda.log" | tr '\n' ' ')"
}

# 60 steps of the default model as 2 stages given one device each (both cuda:0 here: the multi-device path with
# one GPU), with two evaluations: the validation loss and the held-out completions run through the stages as a
# forward-only schedule (Pipeline::forward). tests/pipeline/cuda_multi_device_test.cpp (ctest) compares it with
# one device and, on a machine with two GPUs, runs cuda:0,cuda:1. Own timeout: 60 s.
check_train_devices() {
  local status=FAILED t
  if t=$(capped 60) && timeout "$t" "$build/apps/brigade" train --device cuda --devices cuda:0,cuda:0 --stages 2 \
       --microbatches 4 --steps 60 --eval-every 30 --metrics "$OUT/devices_train.json" > "$OUT/devices_train.log" 2>&1 &&
     grep -q "^eval @ step 30" "$OUT/devices_train.log"; then
    status=ok
  fi
  result train_devices "$status"
  log "brigade train --devices cuda:0,cuda:0 --stages 2 --steps 60: $status; $(grep -E '^final' "$OUT/devices_train.log")"
}

# mpirun -np 2: each rank runs one stage of the default model on cuda:0, its activations and gradients crossing
# through host memory (MpiTransport, docs/distributed.md); then the same 30 steps as 2 stage threads of one
# process. The final losses must agree within 1e-5 relative. Skipped, saying so, where mpirun or the build's MPI
# (tests/dist_mpi_train_driver exists only with it) is missing. Own timeout: 2 x 45 s.
check_mpi() {
  local status="skipped (no mpirun, or a build without MPI)" t
  if command -v mpirun > /dev/null && [ -x "$build/tests/dist_mpi_train_driver" ]; then
    status=FAILED
    local args=(train --device cuda:0 --stages 2 --microbatches 4 --steps 30 --eval-every 0 --eval-iters 2)
    if t=$(capped 45) && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$t" \
         mpirun -np 2 --oversubscribe "$build/apps/brigade" "${args[@]}" --metrics "$OUT/mpi_gpu.json" \
         > "$OUT/mpi_gpu.log" 2>&1 &&
       t=$(capped 45) && timeout "$t" "$build/apps/brigade" "${args[@]}" --metrics "$OUT/mpi_gpu_threads.json" \
         > "$OUT/mpi_gpu_threads.log" 2>&1 &&
       python3 -c "import json,sys; a,b=(json.load(open(p))['final_loss'] for p in sys.argv[1:]); \
sys.exit(0 if abs(a-b) <= 1e-5*abs(b) else 1)" "$OUT/mpi_gpu.json" "$OUT/mpi_gpu_threads.json"; then
      status=ok
    fi
  fi
  result mpi "$status"
  log "mpirun -np 2 brigade train --device cuda:0 (one stage per process) vs 2 stage threads: $status"
}

# GEMM v8, wgmma: whether v8 is offered here (sm_90 + a 90a build), which calls it takes, and the GPT layer shapes
# against the double reference. ctest runs it too; this puts the answer in the summary line. Own timeout: 60 s.
check_wgmma() {
  local line="not run" t
  if [ -x "$build/tests/kernels_cuda_matmul_wgmma_test" ]; then
    if t=$(capped 60); then
      if timeout "$t" "$build/tests/kernels_cuda_matmul_wgmma_test" > "$OUT/wgmma.log" 2>&1; then line=passed
      else line=FAILED; fi
      grep -q "^\[  SKIPPED \]" "$OUT/wgmma.log" && line="$line with skips (see wgmma.log)"
    else
      line="skipped (over budget)"
    fi
  fi
  result wgmma "$line"
  log "gemm v8 wgmma: $line"
}

# ---- GPU checks of correctness go here (each a function, started below) --------------------------------------------
if [ "$build_status" = ok ]; then
  check_ctest &
  check_memcheck &
  check_racecheck &
  check_train_cuda &
  check_train_devices &
  check_mpi &
  check_wgmma &
  wait
fi

# ---- 3. measurements, one at a time on a quiet GPU ---------------------------------------------------------------

# The kernel suites on this GPU (own timeout: 120 s). scripts/bench_kernels.sh runs bench/kernels_bench and
# bench/matmul_bench on the CUDA cases only (the peaks are measured at start-up: D2D copy, cuBLAS fp32/bf16 GEMM
# at 8192^3), 10 event-timed calls per case with the L2 flushed before each; JSON into $OUT/bench (commit it under
# bench/results/), and a PNG when matplotlib is there.
bench_status=FAILED
if [ "$build_status" = ok ] && t=$(capped 120) && BRIGADE_BUILD_DIR="$build" BRIGADE_BENCH_FILTER=/cuda/ BRIGADE_JOBS="$jobs" \
     timeout "$t" scripts/bench_kernels.sh "$OUT/bench" > "$OUT/bench_kernels.log" 2>&1; then
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

# Memory-bound kernels: each version as % of the copy rate at GPT-2 shapes (own timeout: 20 s). No GPU time: reads
# the kernel bench JSON above. scripts/memory_bound_summary.py prints every CUDA version of the memory-bound
# kernels (kernels/elementwise_versions.h and adamw_versions.h v1-scalar/v2-vector128, cross_entropy_versions.h,
# embedding_backward_versions.h v1-atomic/v2-sorted) in f32 and bf16 to memory_bound.txt; its last line (f32,
# v1 -> v2) goes into the summary.
memory_bound="no result"
if t=$(capped 20) && timeout "$t" python3 scripts/memory_bound_summary.py "$OUT"/bench/kernels-*.json \
     > "$OUT/memory_bound.txt" 2>&1; then
  memory_bound=$(tail -n 1 "$OUT/memory_bound.txt")
fi
log "memory-bound kernels: $memory_bound"

# GPT-2-small step: brigade vs PyTorch on this GPU (own timeouts: 4 runs x 28 s <= 120 s). One training step of a
# GPT-2-small-shaped model (12 layers, 12 heads, 768, T 1024, vocab 50257, batch 8): bench/gpt2_step_bench.cpp
# (brigade) and bench/gpt2_step_torch.py (PyTorch, same model and step), fp32 and bf16 autocast; tokens/s and MFU
# (6 N tokens + 12 L C T tokens FLOPs; peak 989 bf16 / 67 fp32 TFLOP/s). JSON per run in $OUT/gpt2_step/, the
# lines in gpt2_step.txt. A figure, not a gate: a failed run shows in the summary.
mkdir -p "$OUT/gpt2_step"
gpt2_ok=0
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

# Pipeline CLI: brigade train as 2 stages on streams of one GPU (own timeout: 60 s). 200 steps of the default model
# as 1f1b, 2 stages x 4 microbatches, both stages on cuda:0 (a compute and a copy stream each), with the Chrome
# trace and the SVG timeline of a steady step in $OUT. 200 steps are too few to learn addition: the accuracy is
# recorded, not required. (The CUDA executor equivalence test, tests/pipeline/cuda_executor_test.cpp, ran under
# ctest.)
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

# Pipeline prediction and scaling: stages as streams of one GPU (own timeouts: 20 s + 40 s).
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

# Where a GPT-2 step's GPU time goes, by kernel (own timeout: 60 s): Nsight Compute times every kernel of two steps
# (one warm-up) of a 2-layer GPT-2-shaped model in bf16 (the other shapes as gpt2_step_bench's defaults), and
# scripts/ncu_by_kernel.py sums them per kernel and grid into ncu_by_kernel.txt (the raw CSV beside it).
# --clock-control none: the card's clocks are left as they are.
profile_line="not run (no ncu)"
if command -v ncu > /dev/null && [ "$build_status" = ok ]; then
  profile_line=FAILED
  profile_args=(--device cuda --dtype bf16 --layers 2 --steps 1 --warmup 1)
  if t=$(capped 60) && timeout "$t" ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
       --csv "$build/bench/gpt2_step_bench" "${profile_args[@]}" > "$OUT/ncu_gpt2_l2_bf16.csv" 2> "$OUT/ncu.log" &&
     python3 scripts/ncu_by_kernel.py "$OUT/ncu_gpt2_l2_bf16.csv" --steps 2 \
       --command "ncu ... gpt2_step_bench ${profile_args[*]}" > "$OUT/ncu_by_kernel.txt" 2>> "$OUT/ncu.log"; then
    profile_line="$(sed -n 's/^# kernel time per step //p' "$OUT/ncu_by_kernel.txt"), largest: $(sed -n '4p' "$OUT/ncu_by_kernel.txt" | sed -E 's/^ *([0-9.]+) +([0-9.]+%) +[0-9.]+ +/\1 ms (\2) /')"
  fi
fi
log "GPT-2 bf16 step (2 layers) by kernel: $profile_line"

# ---- summary ------------------------------------------------------------------------------------------------------
elapsed=$(($(date +%s) - start))
ctest_line=$(read_result ctest)
summary="gpu_check $(date -u +%Y-%m-%dT%H:%MZ) commit $commit on ${gpu_name:-unknown} sm_$arch: build $build_status; ctest $ctest_line; memcheck clean $(read_result memcheck); racecheck clean $(read_result racecheck); train on cuda $(read_result train_cuda); pipeline train on cuda $train_pipeline_line; pipeline benches $pipeline_bench_line; benchmarks $bench_status; ${elapsed}s"
summary="$summary; gpt2 step $gpt2_ok/4 runs ($gpt2_brief)"
summary="$summary; gemm v8 wgmma $(read_result wgmma)"
summary="$summary; train --devices cuda:0,cuda:0 $(read_result train_devices); mpi $(read_result mpi)"
summary="$summary; memory-bound ($memory_bound)"
summary="$summary; profile ($profile_line)"
echo "$summary" | tee "$OUT/summary.txt"
clean_fraction() { local r; r=$(read_result "$1"); [[ "$r" == */* ]] && [ "${r%%/*}" = "${r#*/}" ]; }  # "3/3"
[ "$build_status" = ok ] && [[ "$ctest_line" == "rc 0 "* ]] && clean_fraction memcheck && clean_fraction racecheck &&
  [ "$(read_result train_cuda)" = ok ] && [ "$train_pipeline" = ok ] && [ "$(read_result train_devices)" = ok ] &&
  [ "$bench_status" = ok ]
