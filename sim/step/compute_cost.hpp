// sim/step/compute_cost.hpp — how long one compute operation (one kernel) takes on one GPU.
//
// Owns: the compute model both executors share. Each operation names its kernel kind (dense
// GEMM, grouped/MoE GEMM, prefill attention, paged decode attention, memory-bound elementwise)
// and its shape (`rows`: GEMM M = tokens, tokens per active expert for grouped GEMMs, the mean
// KV length per sequence for prefill attention). Per kind and math type a KernelCurve gives
//   t_flops = flops / (peak(math) · max_eff · rows / (rows + half_rows) · sustained_clock)
//   t_bytes = bytes / (hbm_bw · hbm_eff · bytes / (bytes + half_bytes))
//   time    = fixed + max(t_flops, t_bytes) + overlap_loss · min(t_flops, t_bytes)
// so weight streaming and compute overlap imperfectly and a step's cost never vanishes at large
// batch. The constants are fitted to published kernel measurements of H100-SXM (NVIDIA
// AIConfigurator's TensorRT-LLM GEMM and attention tables, DeepGEMM, FlashMLA), never to an
// end-to-end validation row; docs/validation.md lists each fit and its error. Other GPUs use the
// same fractions of their own peaks unless their spec carries the fractions measured on them
// (GpuSpec::kernels: max_eff and hbm_eff per curve; the Blackwell presets, fitted on the same
// tables' B200 / GB200 / B300 / GB300 rows).
// Thread-safety: pure functions.
#pragma once

#include "sim/plan/dtype.hpp"
#include "sim/step/step_program.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

struct KernelCurve {
  double max_eff = 1;       // best fraction of peak flop/s (large shapes)
  double half_rows = 0;     // rows at which half of max_eff is reached (0 = no shape dependence)
  double hbm_eff = 1;       // best fraction of peak HBM bandwidth
  double half_bytes = 0;    // bytes at which half of hbm_eff is reached
  double overlap_loss = 0;  // fraction of the shorter of compute and memory time that is not hidden
  double fixed = 0;         // seconds per kernel (launch tail, prologue, epilogue)
};

struct ComputeModel {
  // Dense GEMMs, TensorRT-LLM Linear on H100 (AIConfigurator gemm_perf, N,K ∈ [1024, 32768]):
  // RMS log error over 2,500 sampled shapes with N, K ∈ [2048, 32768]: BF16 6.7%, FP8 (per-tensor
  // W8A8) 10%.
  KernelCurve gemm_bf16{0.82, 16, 0.86, 0, 0.20, 4e-6};
  KernelCurve gemm_fp8{0.60, 16, 0.80, 0, 0.30, 12e-6};
  // NVFP4 GEMMs (W4A4, block-scaled, activations quantised in the layer), on GPUs with FP4 tensor
  // cores: every constant fitted to B200's 19 NVFP4 shapes of the same table (M 1..32,768, RMS
  // log error 11%): a flat ≈16 µs at small M (the quantisation kernel and a weight read that
  // reaches only ≈0.5 of HBM), 0.41 of the FP4 peak at large M. On a GPU without FP4 tensor cores
  // FP4 operands run on the FP8 curve and rate (compute_time).
  KernelCurve gemm_fp4{0.41, 0, 0.50, 0, 0.0, 16e-6};
  // Grouped (MoE) GEMMs: the dense curves at rows = tokens per active expert (DeepGEMM's grouped
  // tables reach the same fractions as its dense ones at equal M per group).
  // Prefill attention (FlashAttention-class, BF16 math, causal): efficiency grows with the KV
  // length per sequence (AIConfigurator context_attention: 48 TFLOP/s at 128 tokens, 484 at 8,192).
  KernelCurve attn_prefill{0.60, 1500, 0.87, 0, 0.0, 5e-6};
  // FP8 prefill attention (TensorRT-LLM's FP8 context FMHA, FP8 Q/K/V on an FP8 KV cache): the same
  // form against the FP8 peak, through the same table's FP8 rows at the BF16 curve's two shapes
  // (b = 1, 2,048 and 8,192 tokens, 64/8 heads of 128: 402 and 683 TFLOP/s against BF16's 329 and
  // 508); the tiles fill later, so half of max_eff comes at a longer KV (2,500).
  KernelCurve attn_prefill_fp8{0.45, 2500, 0.87, 0, 0.0, 5e-6};
  // Paged decode attention: bandwidth-bound, saturating at ≈2.9 TB/s once the KV read is large
  // (AIConfigurator generation_attention: 2.9 TB/s; FlashMLA reaches 3.0 TB/s).
  KernelCurve attn_decode{0.50, 0, 0.90, 8e6, 0.0, 8e-6};
  // MLA decode, absorbed (FlashMLA on H800 SXM5: 660 TFLOP/s compute-bound at the ~1,600 MHz it
  // throttles to, whose practical peak the write-up puts at 865 TFLOP/s, so 660/865 = 0.763 of
  // the sustained peak; 3,000 GB/s memory-bound, as the paged decode curve). Grouped-query decode's
  // curve priced it at 0.50: 432 TFLOP/s.
  KernelCurve attn_decode_mla{0.763, 0, 0.90, 8e6, 0.0, 8e-6};
  // MLA decode in FP8 (Plan dtypes attention = fp8, on an FP8 KV cache: TensorRT-LLM's FP8
  // generation MLA): H100's 14 rows of AIConfigurator's generation_mla table (128 and 16 heads,
  // batch 64 and 256, KV 4,095..131,071): 0.36 of the FP8 peak, 0.82 of HBM, RMS 6.3% — on Hopper
  // FP8 buys only ≈17% over BF16 at 128 heads.
  KernelCurve attn_decode_mla_fp8{0.36, 0, 0.82, 8e6, 0.0, 8e-6};
  // Norms, embeddings, elementwise: bandwidth-bound (AIConfigurator's own rule: 0.8 of peak + 3 µs).
  KernelCurve memory{0.50, 0, 0.80, 0, 0.0, 3e-6};
  // Sustained tensor-core clock under serving load, as a fraction of the clock the kernel
  // microbenchmarks above ran at: Hopper throttles to ≈1,600 MHz of its 1,830 MHz boost under
  // sustained MMA load (DeepSeek FlashMLA deep dive, 2025-04-22: "the practical peak FLOPs drops to
  // ~865 TFlops"). Applies to flop time only; 1.0 reproduces the microbenchmarks.
  double sustained_clock = 1600.0 / 1830.0;

  const KernelCurve& curve(KernelCurveId id) const;
};

// The curve an operation of `kind` with `math` follows (FP4 on the FP4 curve: callers map FP4 to
// FP8 first on GPUs without FP4 tensor cores).
KernelCurveId curve_id(ComputeKind kind, Dtype math);

double peak_flops(const GpuSpec& gpu, Dtype math);
// The curve an operation's kernel follows (without the GPU's own corrections).
const KernelCurve& kernel_curve(const ComputeModel& m, ComputeKind kind, Dtype math);
// The same with `gpu`'s corrections (GpuSpec::kernels) applied, and FP4 on a GPU without FP4
// tensor cores priced as FP8 (`math` is updated to the type the kernel runs in).
KernelCurve gpu_curve(const GpuSpec& gpu, const ComputeModel& m, ComputeKind kind, Dtype& math);
// Seconds for a compute operation (its kind, rows, flops, HBM bytes and math type), with
// `share` of the GPU's SMs (StepProgram::compute_share): the flop time is divided by it.
double compute_time(const GpuSpec& gpu, const StepOp& op, const ComputeModel& m = {}, double share = 1);
// The same for a bare kernel description.
double compute_time(const GpuSpec& gpu, ComputeKind kind, double rows, double flops, double bytes, Dtype math,
                    const ComputeModel& m = {}, double share = 1);

// A compute operation's work on `gpu`, as seconds at the GPU's peak: its flops ÷ the peak tensor
// rate of its math type, its HBM bytes ÷ the peak bandwidth, each times the layers it stands for
// (StepOp::weight). Whatever the kernel curve makes of them, this is what was done — what the
// energy model charges (sim/serving/energy.hpp). Zero for communication operations.
struct ComputeWork {
  double tensor = 0, hbm = 0;
};
ComputeWork compute_work(const GpuSpec& gpu, const StepOp& op);

}  // namespace shardsim
