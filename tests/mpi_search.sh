#!/usr/bin/env bash
# tests/mpi_search.sh SHARDSIM — `mpirun -np 2 shardsim search` gives the results of one process
# (issue 16): the same anytime curves, the same journal entries (runs interleave differently) and
# the same results.json apart from wall times; and rank 1 scored some of the plans.
set -euo pipefail
bin=$1
# Every mpirun runs under `timeout`: a rank 0 waiting forever for a lost rank fails the test, not CI.
# Containers often forbid the cross-process copies Open MPI's shared-memory transport tries first.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under tools/test-sanitized: Open MPI's runtime keeps allocations in plugins it dlopens and closes
# again (LeakSanitizer then cannot name them to suppress), so the ranks run without leak checks;
# the single-process runs below keep them, and ASan/UBSan stay on everywhere.
mpi_env=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(search --objective drain --model mixtral-8x7b --cluster dgx-h100:2 --requests 60 --fidelity analytic
      --optimizers megatron,random,ga,sa,rl --budget 24 --seeds 2 --threads 2)
"$bin" "${args[@]}" --quiet --out "$dir/one" > /dev/null
timeout 600 "${mpi_env[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${args[@]}" --out "$dir/mpi" > /dev/null 2> "$dir/mpi.err" ||
  { cat "$dir/mpi.err" >&2; exit 1; }
cmp "$dir/one/anytime.csv" "$dir/mpi/anytime.csv"
cmp <(tail -n +2 "$dir/one/journal.jsonl" | sort) <(tail -n +2 "$dir/mpi/journal.jsonl" | sort)
/usr/bin/python3 - "$dir/one/results.json" "$dir/mpi/results.json" <<'PY'
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("wall_s", "median_wall_s", "cache_hits", "cache_hit_rate")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
if a != b:
    sys.exit("results.json differs between one process and mpirun -np 2")
PY
# rank 1 took part: "evaluations scored per MPI rank: N0 N1" with N1 > 0
grep -q "evaluations scored per MPI rank" "$dir/mpi.err"
n1=$(grep "evaluations scored per MPI rank" "$dir/mpi.err" | awk '{print $NF}')
[ "$n1" -gt 0 ] || { echo "rank 1 scored nothing" >&2; exit 1; }
echo "mpirun -np 2 matches one process; rank 1 scored $n1 plans"

# A rank that dies costs its evaluations in flight, not the study: rank 1 is killed while the
# search runs; rank 0 loses it after --rank-timeout, goes on alone and writes a complete study.
# Killed once the search has started (rank 0 opens its journal after every rank's hello), so that
# the kill never lands inside MPI_Init, whose fence would wait for it.
# Kills the deepseek-v3 search's rank $1 once the study folder $2 has its journal.
kill_rank() {
  for _ in $(seq 1200); do  # up to 2 minutes: inputs load slowly under the sanitizers
    if [ -e "$2/journal.jsonl" ]; then
      for p in $(pgrep -f "shardsim search --objective drain --model deepseek-v3" || true); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
          kill -9 "$p"
          return
        fi
      done
    fi
    sleep 0.1
  done
}
kill_rank 1 "$dir/lost" &
timeout 600 "${mpi_env[@]}" mpirun --allow-run-as-root --oversubscribe --enable-recovery --mca orte_abort_on_non_zero_status 0 -np 2 \
  "$bin" search --objective drain --model deepseek-v3 --cluster dgx-h100:8 --requests 100 --fidelity analytic --optimizers random,sa \
  --budget 60 --seeds 2 --rank-timeout 2 --out "$dir/lost" > /dev/null 2> "$dir/lost.err" || { cat "$dir/lost.err" >&2; exit 1; }
wait
grep -q "MPI rank 1 was lost" "$dir/lost.err" || { cat "$dir/lost.err" >&2; echo "rank 1 was not lost" >&2; exit 1; }
/usr/bin/python3 - "$dir/lost/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["complete"], "the study did not complete"
assert all(run["evaluations"] == 60 for run in r["runs"]), "a run did not spend its budget"
failed = r["faults"]["failed_evaluations"]
assert all("MPI rank 1" in e for e in r["faults"]["errors"]), r["faults"]["errors"]
print("rank 1 killed: the study completed; %d evaluations in flight reported failed" % failed)
PY

# A rank that dies before its hello (here: an input error after MPI_Init, which only rank 1 is
# given) is lost by the same --rank-timeout: rank 0 does not wait for it forever (it did: a
# blocking probe for every rank's hello), and writes a complete study scored on its own.
small=(search --objective drain --model mixtral-8x7b --cluster dgx-h100:2 --requests 60 --fidelity analytic --optimizers random
       --budget 8 --seeds 1 --rank-timeout 2)
timeout 300 "${mpi_env[@]}" mpirun --allow-run-as-root --oversubscribe --enable-recovery --mca orte_abort_on_non_zero_status 0 \
  -np 1 "$bin" "${small[@]}" --out "$dir/early" : -np 1 "$bin" "${small[@]}" --base "$dir/no-such-plan.json" --out "$dir/early1" \
  > /dev/null 2> "$dir/early.err" || { cat "$dir/early.err" >&2; echo "mpirun failed or hung (rank 1 died before its hello)" >&2; exit 1; }
grep -q "MPI rank 1 was lost" "$dir/early.err" || { cat "$dir/early.err" >&2; echo "rank 1 was not lost" >&2; exit 1; }
grep -q "no-such-plan.json" "$dir/early.err" || { cat "$dir/early.err" >&2; echo "rank 1 did not fail on its input" >&2; exit 1; }
/usr/bin/python3 - "$dir/early/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["complete"] and all(run["evaluations"] == 8 for run in r["runs"]), "the study did not complete"
assert r["faults"]["failed_evaluations"] == 0, r["faults"]
print("rank 1 died before its hello: lost after --rank-timeout, the study completed on rank 0")
PY

# Rank 0 dies: the worker ranks stop on their own after --rank-timeout (they waited forever, holding
# the allocation until its wall-clock limit). Rank 0 is killed once the search has started.
kill_rank 0 "$dir/dead0" &
rc=0
timeout 300 "${mpi_env[@]}" mpirun --allow-run-as-root --oversubscribe --enable-recovery --mca orte_abort_on_non_zero_status 0 -np 2 \
  "$bin" search --objective drain --model deepseek-v3 --cluster dgx-h100:8 --requests 100 --fidelity analytic --optimizers random,sa \
  --budget 400 --seeds 2 --rank-timeout 2 --out "$dir/dead0" > /dev/null 2> "$dir/dead0.err" || rc=$?
wait
[ "$rc" -ne 124 ] || { cat "$dir/dead0.err" >&2; echo "rank 1 waited forever for a dead rank 0" >&2; exit 1; }
grep -q "rank 0 stopped answering" "$dir/dead0.err" || { cat "$dir/dead0.err" >&2; echo "rank 1 did not notice rank 0's death" >&2; exit 1; }
echo "rank 0 killed: rank 1 stopped on its own after --rank-timeout"
