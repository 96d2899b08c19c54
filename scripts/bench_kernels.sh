#!/usr/bin/env bash
# scripts/bench_kernels.sh [--smoke] [OUTDIR] — runs brigade's kernel benchmarks and keeps their JSON.
#
#   scripts/bench_kernels.sh                  # full run into bench/results/
#   scripts/bench_kernels.sh --smoke          # CI: every bench executable briefly (a few seconds each); fails
#                                             # when one crashes or a kernel throws; JSON into a temp dir
#   BRIGADE_BUILD_DIR=build-gpu scripts/bench_kernels.sh "$OUT"   # scripts/gpu_check.sh
#
# Files: OUTDIR/<suite>-<UTC date>-<commit>-<device>.json (Google Benchmark's JSON; its "context" holds the
# date, commit, device, load and the peaks measured at start-up; see bench/bench_support.h). Draw them with
# scripts/bench_chart.py. Environment: BRIGADE_BUILD_DIR (default build, the default preset's),
# BRIGADE_BENCH_MIN_TIME (seconds per CPU case; default 0.2, smoke 0.001), BRIGADE_BENCH_FILTER (a
# --benchmark_filter regex for our suites, e.g. /cuda/), BRIGADE_BENCH_CUDA_ITERS (timed calls per CUDA case,
# default 10), BRIGADE_JOBS (build parallelism).
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
outdir=""
for arg in "$@"; do
  case "$arg" in
    --smoke) smoke=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "bench_kernels.sh: unknown flag '$arg' (expected --smoke [OUTDIR])" >&2; exit 2 ;;
    *) outdir="$arg" ;;
  esac
done

build="${BRIGADE_BUILD_DIR:-build}"
if [ "$smoke" = 1 ]; then
  min_time="${BRIGADE_BENCH_MIN_TIME:-0.001}"
  outdir="${outdir:-$(mktemp -d -t brigade-bench-smoke.XXXXXX)}"
else
  min_time="${BRIGADE_BENCH_MIN_TIME:-0.2}"
  outdir="${outdir:-bench/results}"
fi
mkdir -p "$outdir"

# Our suites (bench_support: peaks, context, --smoke) and the others' Google Benchmark executables, with the
# case(s) a smoke run exercises.
suites=(kernels matmul)
others=(train_step pipeline_scaling)
declare -A other_smoke_filter=([train_step]='TrainStep/L:2/C:64|Kernel' [pipeline_scaling]='PipelineStep/2/4/')

targets=()
for s in "${suites[@]}"; do targets+=("${s}_bench"); done
if [ "$smoke" = 1 ]; then for s in "${others[@]}"; do targets+=("${s}_bench"); done; fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  echo "bench_kernels.sh: no build in '$build' (configure one, e.g. cmake --preset default, or set BRIGADE_BUILD_DIR)" >&2
  exit 2
fi
nice -n 19 cmake --build "$build" -j "${BRIGADE_JOBS:-2}" --target "${targets[@]}" >/dev/null

if [ -n "${BRIGADE_COMMIT:-}" ]; then
  commit="$BRIGADE_COMMIT"  # the caller says which commit (a copy of the tree may carry a stale .git)
elif commit=$(git rev-parse --short HEAD 2>/dev/null); then
  git diff --quiet HEAD -- 2>/dev/null || commit="${commit}-dirty"  # uncommitted changes anywhere in the tree
else
  commit=unknown
fi
date=$(date -u +%Y%m%d-%H%M)
slug() { tr 'A-Z' 'a-z' | sed -e 's/([^)]*)//g' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//' | cut -c1-40; }
device=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1 | slug)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | slug || true)
[ -n "$gpu" ] && device="$gpu"
device="${device:-unknown}"
[ -n "${OMP_NUM_THREADS:-}" ] && device="${device}-omp${OMP_NUM_THREADS}"
export BRIGADE_COMMIT="$commit"

echo "bench_kernels.sh: $( [ "$smoke" = 1 ] && echo smoke || echo full ) run, commit $commit, device $device," \
     "min time ${min_time}s, load $(cut -d' ' -f1-3 /proc/loadavg), into $outdir"
failed=()
run() {  # run NAME JSON ARGS...: one executable, its JSON, its exit status recorded
  local name=$1 json=$2
  shift 2
  local start=$SECONDS
  if "$build/bench/$name" --benchmark_out="$json" --benchmark_out_format=json \
       --benchmark_min_time="$min_time" "$@" > "$json.log" 2>&1; then
    local cases
    cases=$(grep -c '"run_name"' "$json" 2>/dev/null || true)
    if [ "${cases:-0}" -gt 0 ]; then
      echo "  $name: ok ($((SECONDS - start)) s, $cases cases) -> $json"
    else
      echo "  $name: FAILED: no case ran (filter matched nothing?); see $json.log" >&2
      failed+=("$name")
    fi
  else
    echo "  $name: FAILED (exit $?, $((SECONDS - start)) s); last lines of $json.log:" >&2
    tail -15 "$json.log" >&2
    failed+=("$name")
  fi
}
for s in "${suites[@]}"; do
  extra=()
  [ "$smoke" = 1 ] && extra+=(--smoke)
  [ -n "${BRIGADE_BENCH_FILTER:-}" ] && extra+=(--benchmark_filter="$BRIGADE_BENCH_FILTER")
  run "${s}_bench" "$outdir/${s}-${date}-${commit}-${device}.json" "${extra[@]}"
done
if [ "$smoke" = 1 ]; then
  for s in "${others[@]}"; do
    run "${s}_bench" "$outdir/${s}-${date}-${commit}-${device}.json" --benchmark_filter="${other_smoke_filter[$s]}"
  done
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "bench_kernels.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "bench_kernels.sh: all suites ran"
