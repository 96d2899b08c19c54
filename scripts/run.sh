#!/usr/bin/env bash
# brigade's main job on a fresh machine: install what is missing, build, and run it.
# Usage: scripts/run.sh [extra flags for `brigade train`]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
source scripts/env.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$BRIGADE_JOBS" --target brigade_cli
./build/apps/brigade info
./build/apps/brigade demo
