#!/usr/bin/env bash
# Unit tests again in a CPU-only build under sanitizers.
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer, every unit test (default)
#   scripts/sanitize.sh tsan   ThreadSanitizer over the threaded code: the pipeline tests and the autograd
#                              engine tests (OpenMP pinned to one thread: libgomp is not TSan-instrumented and
#                              would report its own synchronisation as races)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-asan}"
scripts/install_deps.sh
source scripts/env.sh
cmake --preset "$preset"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
if [ "$preset" = tsan ]; then
  targets=(autograd_engine_test)
  for f in tests/pipeline/*_test.cpp; do
    name=$(basename "$f" .cpp)
    case "$name" in *_slow_test | cuda_*) continue ;; esac  # the sanitizer presets build unit tests only
    targets+=("pipeline_$name")
  done
  cmake --build --preset tsan -j "$BRIGADE_JOBS" --target "${targets[@]}"
  export OMP_NUM_THREADS=1
  # MemoryModelVsExecutor runs 12 full pipeline configurations only to compare byte counts (3 minutes
  # under TSan); the executor's threading is covered by the equivalence, fault and transport tests.
  ctest --preset tsan -j "$BRIGADE_JOBS" -R '^(pipeline\.|autograd\.Engine\.|autograd\.Checkpoint\.)' \
    -E 'MemoryModelVsExecutor'
else
  cmake --build --preset "$preset" -j "$BRIGADE_JOBS"
  ctest --preset "$preset" -j "$BRIGADE_JOBS"
fi
