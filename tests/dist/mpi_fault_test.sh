#!/usr/bin/env bash
# Failures across processes (docs/distributed.md, "When a rank fails"), two cases on `brigade train`
# launched as 2 processes:
#   1. a rank raises an error mid-step (--fail-at 3:1:B2, the fault-injection switch);
#   2. a rank is killed with SIGKILL mid-run.
# In both, mpirun must exit non-zero within the deadline, the output must name the failed rank (and, for
# the error, its stage, action and microbatch and every rank's position), and no process may be left.
#   3. the sharded checkpoint committed before a failure loads, and --resume from it ends with the loss of
#      the run that was never interrupted, bit for bit.
#
# usage: tests/dist/mpi_fault_test.sh MPIRUN BRIGADE     (ctest runs it: dist.mpi_faults)
set -u
mpirun=$1
brigade=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tiny=(--layers 2 --embd 32 --heads 2 --batch 16 --microbatches 4 --eval-every 0 --eval-iters 1 --timeout 10)

fail() {
  echo "FAIL: $*"
  echo "---- output ----"
  cat "$work/out"
  exit 1
}
# The ranks of one launch are found by a marker on their command line (the --metrics path, unique to
# this test), never by the program's name.
left_over() { pgrep -f "$1" > /dev/null; }

# ---- 1. a rank raises an error ----------------------------------------------------------------------------
marker="$work/raise.json"
start=$(date +%s)
timeout 120 "$mpirun" -np 2 --oversubscribe "$brigade" train "${tiny[@]}" --steps 50 --metrics "$marker" \
  --fail-at 3:1:B2 > "$work/out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "a rank raised an error but mpirun exited 0"
[ "$rc" -ne 124 ] || fail "the job did not end within 120 s"
grep -q "the run failed: rank 1: stage 1, action [0-9]* (B2): injected fault" "$work/out" ||
  fail "no report naming rank 1, stage 1 and B2"
grep -q "rank 1 (replica 0, stage 1): failed at action [0-9]* (B2, microbatch 2); last done: action" \
  "$work/out" || fail "no position for the failed rank"
grep -q "rank 0 (replica 0, stage 0): stopped in action [0-9]* (.*); last done: action" "$work/out" ||
  fail "no position for rank 0"
[ "$(grep -c "the run failed" "$work/out")" -eq 1 ] || fail "the report is printed more than once"
sleep 1
left_over "$marker" && fail "a rank is still running after mpirun exited"
echo "ok: a raised error ends both ranks in ${elapsed} s (exit status $rc) with one report"

# ---- 2. a rank is killed ------------------------------------------------------------------------------------
marker="$work/kill.json"
"$mpirun" -np 2 --oversubscribe "$brigade" train "${tiny[@]}" --steps 100000 --metrics "$marker" \
  > "$work/out" 2>&1 &
launcher=$!
for _ in $(seq 600); do  # until rank 0 prints the layout table (both ranks have joined)
  grep -q "^rank  replica" "$work/out" && break
  sleep 0.1
done
sleep 2  # well into the steps
victim=""
for pid in $(pgrep -f "$marker"); do
  if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$pid; fi
done
[ -n "$victim" ] || { kill "$launcher"; fail "rank 1 was not found"; }
kill -9 "$victim"
start=$(date +%s)
for _ in $(seq 600); do
  kill -0 "$launcher" 2> /dev/null || break
  sleep 0.1
done
elapsed=$(( $(date +%s) - start ))
if kill -0 "$launcher" 2> /dev/null; then
  kill "$launcher"
  fail "the job was still running 60 s after rank 1 was killed"
fi
wait "$launcher"
rc=$?
[ "$rc" -ne 0 ] || fail "rank 1 was killed but mpirun exited 0"
grep -Eq "rank 1 .*(signal 9|Killed)|rank 1: no report" "$work/out" || fail "nothing names the killed rank 1"
sleep 1
left_over "$marker" && fail "a rank is still running after mpirun exited"
echo "ok: a killed rank ends the job in ${elapsed} s (exit status $rc)"

# ---- 3. the last checkpoint survives, and --resume continues exactly -------------------------------------
ck="$work/ck.safetensors.index.json"
"$mpirun" -np 2 --oversubscribe "$brigade" train "${tiny[@]}" --steps 6 --save "$ck" --save-every 3 \
  --fail-at 5:1:B1 --metrics "$work/failed.json" > "$work/out" 2>&1 && fail "the run with --fail-at 5:1:B1 exited 0"
grep -q "the run failed: rank 1: stage 1" "$work/out" || fail "no report of the failure at step 5"
[ -f "$ck" ] || fail "the checkpoint of step 3 is missing"
"$mpirun" -np 2 --oversubscribe "$brigade" train --resume "$ck" --metrics "$work/resumed.json" \
  > "$work/out" 2>&1 || fail "--resume from the checkpoint of step 3 failed"
grep -q "resumed from '$ck' at step 3" "$work/out" || fail "the resumed run did not start at step 3"
"$mpirun" -np 2 --oversubscribe "$brigade" train "${tiny[@]}" --steps 6 --metrics "$work/whole.json" \
  > "$work/out" 2>&1 || fail "the uninterrupted run failed"
python3 - "$work/resumed.json" "$work/whole.json" <<'PY' || fail "the resumed run's final loss differs"
import json, sys
resumed, whole = (json.load(open(p))["final_loss"] for p in sys.argv[1:])
print(f"final loss after 6 steps: resumed {resumed!r}, uninterrupted {whole!r}")
sys.exit(0 if resumed == whole else 1)
PY
echo "ok: the checkpoint of step 3 survives the failure; --resume ends with the uninterrupted loss"
