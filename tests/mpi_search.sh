#!/usr/bin/env bash
# tests/mpi_search.sh SHARDSIM — `mpirun -np 2 shardsim search` gives the results of one process
# (issue 16): the same anytime curves, the same journal entries (runs interleave differently) and
# the same results.json apart from wall times; and rank 1 scored some of the plans.
set -euo pipefail
bin=$1
# Containers often forbid the cross-process copies Open MPI's shared-memory transport tries first.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(search --model mixtral-8x7b --cluster dgx-h100:2 --requests 60 --fidelity analytic
      --optimizers megatron,random,ga,sa,rl --budget 24 --seeds 2 --threads 2)
"$bin" "${args[@]}" --quiet --out "$dir/one" > /dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${args[@]}" --out "$dir/mpi" > /dev/null 2> "$dir/mpi.err" ||
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
