#!/usr/bin/env bash
# Fuzzes every reader of untrusted bytes for a bounded time (fuzz/fuzz_targets.h: the safetensors reader,
# the sharded checkpoint's index and shard readers, the schedule files' JSON and CSV readers) with libFuzzer
# under AddressSanitizer + UndefinedBehaviorSanitizer, in a clang build of its own (the `fuzz` preset,
# build-fuzz/).
#
#   scripts/fuzz.sh            every target for 5 s (what CI runs)
#   scripts/fuzz.sh 300        every target for 5 minutes
#   scripts/fuzz.sh 60 safetensors schedule_csv    some targets
#
# Each run starts from the seeds in fuzz/corpus/<target>/ and the kept inputs in fuzz/regressions/<target>/
# (copied to build-fuzz/corpus/<target>/, where new inputs accumulate between runs; the repository's folders
# are not touched). A finding stops the script with a non-zero status and leaves the input in
# build-fuzz/findings/; fix the reader, then keep the input as fuzz/regressions/<target>/<name>, which
# tests/fuzz/fuzz_corpus_test.cpp replays in every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors checkpoint_index checkpoint_shard schedule_json schedule_csv)
case "$seconds" in ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [seconds per target] [target...]" >&2; exit 2 ;; esac

scripts/install_deps.sh --tests
source scripts/env.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$BRIGADE_JOBS" --target "${targets[@]/%/_fuzzer}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
mkdir -p build-fuzz/findings
for target in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$target"
  mkdir -p "$corpus"
  for kept in "fuzz/corpus/$target" "fuzz/regressions/$target"; do
    [ -d "$kept" ] && cp -n "$kept"/* "$corpus"/ 2>/dev/null || true
  done
  echo "== fuzz: $target for ${seconds} s =="
  # -timeout: an input that takes over 10 s is a hang; -rss_limit_mb: one that allocates 2 GiB is a finding.
  if ! "build-fuzz/fuzz/${target}_fuzzer" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="build-fuzz/findings/${target}-" -print_final_stats=1 2>"build-fuzz/${target}.log"; then
    tail -n 60 "build-fuzz/${target}.log"
    echo "fuzz: $target found an input that breaks it: build-fuzz/findings/${target}-*" >&2
    echo "      fix the reader, then keep the input under fuzz/regressions/$target/" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/${target}.log" | tr '\n' ' '
  echo
done
echo "fuzz: no findings"
