# Sourced by the benchmark scripts that write bench/results/<name>-<stamp>-<commit>-<machine>.json, with
# ROOT set to the repository: sets commit (short hash, "-dirty" with uncommitted changes), cpu (the model
# name), stamp (UTC date and minute) and machine (the CPU name as a file-name piece).
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$ROOT" diff --quiet HEAD -- . 2>/dev/null || commit="$commit-dirty"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
stamp="$(date -u +%Y%m%d-%H%M)"
machine="$(echo "$cpu" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//' | cut -c1-24)"
