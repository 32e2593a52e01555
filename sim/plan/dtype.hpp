// sim/plan/dtype.hpp — numeric formats of weights, activations and KV cache.
//
// Owns: Dtype, its size in bytes and its name. FP4 (MXFP4-style) counts 0.5 byte per element
// plus nothing for scales (a documented simplification).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shardsim {

enum class Dtype { BF16, FP16, FP8, FP4 };

inline double bytes_of(Dtype d) {
  switch (d) {
    case Dtype::BF16:
    case Dtype::FP16: return 2.0;
    case Dtype::FP8: return 1.0;
    case Dtype::FP4: return 0.5;
  }
  return 2.0;
}

inline const char* to_string(Dtype d) {
  switch (d) {
    case Dtype::BF16: return "bf16";
    case Dtype::FP16: return "fp16";
    case Dtype::FP8: return "fp8";
    case Dtype::FP4: return "fp4";
  }
  return "bf16";
}

inline std::optional<Dtype> parse_dtype(std::string_view s) {
  if (s == "bf16") return Dtype::BF16;
  if (s == "fp16") return Dtype::FP16;
  if (s == "fp8") return Dtype::FP8;
  if (s == "fp4" || s == "mxfp4") return Dtype::FP4;
  return std::nullopt;
}

}  // namespace shardsim
