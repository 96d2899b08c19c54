#!/usr/bin/env bash
# The unit tests again in a CPU-only build under sanitizers: asan (AddressSanitizer + UBSan, default) or tsan.
# Usage: scripts/sanitize.sh [asan|tsan]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-asan}"
scripts/install_deps.sh
source scripts/env.sh
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$BRIGADE_JOBS"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
ctest --preset "$preset" -j "$BRIGADE_JOBS"
