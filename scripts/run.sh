#!/usr/bin/env bash
# brigade's main job on a fresh machine: install what is missing, build, and train the default model.
# `brigade train` with no arguments trains a small GPT on the built-in 3-digit addition task as a pipeline (2 stages
# x 4 microbatches, 1F1B) and reports its exact-match accuracy on held-out problems, the partition, each stage's
# memory and the bubble (a few minutes on 2 CPU cores; see docs/training.md and docs/pipeline.md).
# Usage: scripts/run.sh [extra flags for `brigade train`, e.g. --save model.safetensors --metrics m.json]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
source scripts/env.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$BRIGADE_JOBS" --target brigade_cli
./build/apps/brigade info
./build/apps/brigade train "$@"
