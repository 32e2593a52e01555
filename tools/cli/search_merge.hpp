// tools/cli/search_merge.hpp — `shardsim search merge DIR… --out OUT`: studies of one problem
// combined into one, as if their runs had been one search.
//
// Owns: write_merged_journal(). It reads every study's journal, refuses studies of different
// problems (any recorded input but the optimizers and seeds differs: InputError naming the
// journal and the field) and runs given twice with different evaluations, orders the union of the
// runs canonically (the optimizers in the registry's order, seeds ascending: the result does not
// depend on the order of the DIRs; a run present in several studies is kept once) and writes
// OUT/journal.jsonl: the first study's header with --optimizers, --seeds and the runs of the
// union, then every evaluation, grouped by run. The command then resumes OUT, which replays every
// evaluation through its optimizer — nothing is simulated again — and writes the report.
// The union must be every optimizer × one contiguous range of seeds (what --seeds can say).
#pragma once

#include <string>
#include <vector>

namespace shardsim::cli {

void write_merged_journal(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace shardsim::cli
