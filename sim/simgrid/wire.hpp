// sim/simgrid/wire.hpp — the messages between the simulator and its SimGrid worker processes
// (common/worker_pool.hpp): step programs out, step timings and timelines back.
//
// Owns: the encodings of StepProgram, StepTiming and a timeline (vector<TimelineEvent>), written
// with the codec of common/wire_codec.hpp (its format: native widths, a tag and version per
// message, counts before vectors, doubles as their bit patterns).
// Invariants: decode(encode(x)) == x field by field; a decoder consumes its input exactly, and a
// truncated, over-long or mistagged input, an enum value out of range, or an index (dependency
// range, group, all-to-all matrix) pointing outside the program throws WireError — never reads out
// of bounds and never allocates more than the input could hold.
// Thread-safety: free functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/wire_codec.hpp"
#include "sim/step/executor.hpp"
#include "sim/step/step_program.hpp"

namespace shardsim {

std::string encode(const StepProgram& program);
StepProgram decode_program(std::string_view bytes);
std::string encode(const StepTiming& timing);
StepTiming decode_timing(std::string_view bytes);
std::string encode(const std::vector<TimelineEvent>& timeline);
std::vector<TimelineEvent> decode_timeline(std::string_view bytes);

}  // namespace shardsim
