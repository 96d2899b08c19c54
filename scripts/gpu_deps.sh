#!/usr/bin/env bash
# Run HERE (a Debian machine with network access to its package mirror) before using the lent GPU machine:
# downloads the Debian packages brigade builds against (GoogleTest, Google Benchmark, nlohmann-json, CLI11)
# into .gpudeps/, which the device call carries (`carry: [".gpudeps"]`). The GPU machine can fetch nothing
# itself; scripts/gpu_check.sh unpacks these into a private prefix when the headers are missing there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpudeps/' .git/info/exclude 2>/dev/null || echo '/.gpudeps/' >> .git/info/exclude
mkdir -p .gpudeps
cd .gpudeps
apt-get download googletest libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian nlohmann-json3-dev \
  libcli11-dev
ls -la
