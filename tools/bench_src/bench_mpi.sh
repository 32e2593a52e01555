#!/usr/bin/env bash
# tools/bench mpi [BUDGET] — a SimGrid-tier search in one process vs `mpirun -np 2` (issue 16),
# with this machine's ceiling: on one machine the ranks share its cores, so the most mpirun can
# give here is what more worker processes give; across machines each rank brings its own cores.
set -euo pipefail
bin=$1
budget=${2:-40}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(search --model deepseek-v3 --cluster dgx-h100:8 --requests 100 --fidelity simgrid --samples 8
      --optimizers random,sa --budget "$budget" --seeds 2)
t0=$(date +%s.%N)
"$bin" "${args[@]}" --out "$dir/one" > /dev/null 2>&1
t1=$(date +%s.%N)
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" "${args[@]}" --out "$dir/mpi" > /dev/null 2> "$dir/mpi.err"
t2=$(date +%s.%N)
cores=$(nproc)
one=$(echo "$t1 - $t0" | bc -l); two=$(echo "$t2 - $t1" | bc -l)
printf 'SimGrid-tier search: deepseek-v3 on dgx-h100:8, 100 requests, random + sa, 2 seeds × %s evaluations\n' "$budget"
printf '  one process (%s workers)      %6.1f s\n' "$cores" "$one"
printf '  mpirun -np 2 (%s workers each) %6.1f s   speed-up %.2f×\n' "$cores" "$two" "$(echo "$one / $two" | bc -l)"
printf '  %s\n' "$(grep 'scored per MPI rank' "$dir/mpi.err")"
printf '  this machine: %s cores, so the ceiling on one machine is 1.0× (both ranks share them)\n' "$cores"
cmp -s "$dir/one/anytime.csv" "$dir/mpi/anytime.csv" && echo "  results: identical anytime curves" || echo "  results: DIFFER"
