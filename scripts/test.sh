#!/usr/bin/env bash
# Installs what is missing, builds (with CUDA where the toolkit is present) and runs every test.
# CUDA tests skip with a reason where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --tests
source scripts/env.sh
cmake --preset default
cmake --build --preset default -j "$BRIGADE_JOBS"
ctest --preset default -j "$BRIGADE_JOBS"
