// studies/search_merge.hpp — `shardsim search merge DIR… --out OUT`: studies of one problem
// combined into one, as if their runs had been one search.
//
// Owns: write_merged_journal() and check_same_problem(). It reads every study's journal, refuses studies of different
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

#include "common/json_reader.hpp"

namespace shardsim {

void write_merged_journal(const std::vector<std::string>& dirs, const std::string& out);

// Refuses (InputError(other_path, "/inputs/<field>", … + why)) two journal headers whose recorded
// inputs differ in a field not in `may_differ`, naming both values. (Also `search compare`'s check.)
void check_same_problem(const json& first, const std::string& first_path, const json& other, const std::string& other_path,
                        const std::vector<std::string>& may_differ, const std::string& why);

}  // namespace shardsim
