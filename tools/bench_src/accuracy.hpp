// tools/bench_src/accuracy.hpp — `shardsim_bench accuracy`: issue 11's reference set, fast against exact.
#pragma once

#include <string>

namespace shardsim {

// Only the cases whose "model plan" contains `only` (all when empty).
void bench_accuracy(const std::string& only = "");

}  // namespace shardsim
