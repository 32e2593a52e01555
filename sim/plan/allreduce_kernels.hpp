// sim/plan/allreduce_kernels.hpp — whose kernels a tensor-parallel all-reduce runs.
//
// Owns: AllReduceKernels, the engine setting (EngineSettings::allreduce) that a step program
// carries (StepProgram::allreduce) to the collective pricer (sim/step/collective_cost.hpp).
#pragma once

#include <cstdint>

namespace shardsim {

// Inside one NVLink domain, NCCL's kernels, or an engine's own custom all-reduce (TensorRT-LLM's,
// vLLM's, SGLang's: one-shot and two-shot kernels over peer-mapped buffers; their constants and
// limits: CustomAllReduce in collective_cost.hpp). Across domains every engine runs NCCL's.
enum class AllReduceKernels : std::uint8_t { Nccl, Trtllm, Vllm, Sglang };
const char* to_string(AllReduceKernels k);

}  // namespace shardsim
