#!/usr/bin/env bash
# Regenerates every picture in docs/img/ from the code, so that no picture can drift from what brigade does:
#
#   scripts/make_docs_images.sh                    # builds what it needs in build-cpu/, rewrites docs/img/
#   scripts/make_docs_images.sh --with-training    # also the measured timeline of a default training run
#   scripts/make_docs_images.sh --no-build --out DIR   # what tests/docs/doc_sync_test runs: draw into DIR with
#                                                  # the binaries already built, to compare with docs/img/
#
# What draws what:
#   docs/figures (doc_figures)  tensor_views.svg (strides of a transpose, a narrow and an expand, from real
#                               tensors), gemm_tiling.svg and flash_tiling.svg (from the tile constants in the
#                               kernels' source), online_softmax.svg (every number computed and checked against
#                               brigade's softmax), autograd_readme_example.svg (autograd::graph_to_svg of the
#                               README's example)
#   brigade schedule --svg      schedule_<name>.svg for every schedule docs/schedules.md draws (4 stages x 8
#                               microbatches, a memory band under each lane), schedule_1f1b_recompute.svg, and
#                               schedule_compare.svg (the schedules side by side on one time and memory scale)
#   brigade train --timeline    train_default_timeline.svg, only with --with-training: a default training run
#                               (about a minute on a quiet 2-core machine; the picture is machine-dependent, so
#                               run it when `uptime` shows a low load and say the load in docs/pipeline.md)
#
# Environment: BRIGADE_BUILD_DIR (default build-cpu, configured with `cmake --preset cpu` when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/make_docs_images.sh [--with-training] [--no-build] [--out DIR]"
with_training=0
build_first=1
out=docs/img
while [ $# -gt 0 ]; do
  case "$1" in
    --with-training) with_training=1 ;;
    --no-build) build_first=0 ;;
    --out)
      [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
      out=$2
      shift
      ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done

build=${BRIGADE_BUILD_DIR:-build-cpu}
if [ "$build_first" = 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    if [ "$build" = build-cpu ]; then cmake --preset cpu >/dev/null; else cmake -S . -B "$build" >/dev/null; fi
  fi
  cmake --build "$build" -j "${BRIGADE_JOBS:-2}" --target brigade_cli doc_figures
fi
brigade="$build/apps/brigade"
mkdir -p "$out"

"$build/docs/figures/doc_figures" "$out"

draw() {  # draw NAME ARGS...: brigade schedule ARGS --svg docs/img/NAME.svg
  local name=$1
  shift
  "$brigade" schedule "$@" --svg "$out/$name.svg" >/dev/null
  echo "wrote $out/$name.svg"
}
for s in gpipe 1f1b zb-h1 zb-h2 zb-v v-half v-min dualpipev; do
  draw "schedule_$s" --schedule "$s" --stages 4 --microbatches 8
done
draw schedule_interleaved --schedule interleaved --stages 4 --microbatches 8 --virtual 2
draw schedule_looped-bfs --schedule looped-bfs --stages 4 --microbatches 8 --virtual 2
draw schedule_1f1b_recompute --schedule 1f1b --stages 4 --microbatches 8 --recompute always \
  --memory full=1,boundary=0.1
draw schedule_compare --compare gpipe,1f1b,interleaved,zb-h1,zb-h2,zb-v --stages 4 --microbatches 8 --virtual 2

if [ "$with_training" = 1 ]; then
  echo "load before the training run: $(uptime)"
  "$brigade" train --timeline "$out/train_default_timeline.svg" | tail -n 12
  echo "load after: $(uptime)"
fi

# A picture in docs/img/ that this script did not write would be hand-made: say so.
for f in "$out"/*; do
  case "$(basename "$f")" in
    tensor_views.svg | gemm_tiling.svg | flash_tiling.svg | online_softmax.svg | autograd_readme_example.svg) ;;
    schedule_*.svg | train_default_timeline.svg) ;;
    *) echo "warning: $f is not drawn by this script" >&2 ;;
  esac
done
