#!/usr/bin/env bash
# The cost of running the pipeline's stages as processes instead of threads (docs/distributed.md,
# "Measured"): the same `brigade train` run, 2 stage threads of one process against 2 processes under
# mpirun (over shared memory, then over TCP), and 2 stages x 2 replicas against 2 stages x 1 replica as
# processes. Rounds alternate the configurations, so that a change in the machine's load hits all of them;
# each run reports its steady-state median step time (--metrics ms_per_step), and the script prints the
# median over rounds and the ratios, and writes them with the load average to bench/results/.
#
#   bench/mpi_overhead.sh [BUILD_DIR] [ROUNDS] [STEPS]        # defaults: build-cpu 5 300
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cpu}
rounds=${2:-5}
steps=${3:-300}
brigade="$build/apps/brigade"
[ -x "$brigade" ] || { echo "no $brigade: build it first (cmake --build --preset cpu --target brigade_cli)"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(train --steps "$steps" --eval-every 0 --eval-iters 1)
shm=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader)
tcp=(mpirun --oversubscribe --mca pml ob1 --mca btl self,tcp)

ms() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ms_per_step'])" "$1"; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
  "$brigade" "${run[@]}" --metrics "$work/threads-$r.json" > /dev/null 2>&1
  "${shm[@]}" -np 2 "$brigade" "${run[@]}" --metrics "$work/shm-$r.json" > /dev/null 2>&1
  "${tcp[@]}" -np 2 "$brigade" "${run[@]}" --metrics "$work/tcp-$r.json" > /dev/null 2>&1
  "${shm[@]}" -np 4 "$brigade" "${run[@]}" --data-parallel 2 --metrics "$work/dp2-$r.json" > /dev/null 2>&1
  echo "round $r: threads $(ms "$work/threads-$r.json")  processes/shm $(ms "$work/shm-$r.json")" \
       " processes/tcp $(ms "$work/tcp-$r.json")  2x2 processes $(ms "$work/dp2-$r.json") ms/step"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$work" "$rounds" "$steps" "$load_before" "$load_after" "$(git rev-parse --short HEAD)" <<'PY'
import json, statistics, sys, datetime, os
work, rounds, steps, before, after, commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
def med(kind):
    return statistics.median(json.load(open(f"{work}/{kind}-{r}.json"))["ms_per_step"] for r in range(1, rounds + 1))
m = {k: med(k) for k in ("threads", "shm", "tcp", "dp2")}
result = {
    "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
    "command": f"bench/mpi_overhead.sh build-cpu {rounds} {steps}", "load_average_before": before,
    "load_average_after": after, "cpus": os.cpu_count(),
    "ms_per_step_median": m,
    "ratio_processes_shm_over_threads": m["shm"] / m["threads"],
    "ratio_processes_tcp_over_threads": m["tcp"] / m["threads"],
    "ratio_2x2_over_2x1_processes": m["dp2"] / m["shm"],
}
print(json.dumps(result, indent=2))
os.makedirs("bench/results", exist_ok=True)
path = f"bench/results/mpi-overhead-{datetime.datetime.utcnow():%Y%m%d-%H%M}-{commit}.json"
json.dump(result, open(path, "w"), indent=2)
print("written to", path)
PY
