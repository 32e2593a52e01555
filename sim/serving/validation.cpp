// sim/serving/validation.cpp — the validation rows: kernels, collectives, end-to-end runs.
#include "sim/serving/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

#include <cctype>
#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "common/readable_number.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/disaggregated.hpp"
#include "sim/serving/serving.hpp"
#include "sim/serving/validation_groups.hpp"
#include "sim/step/batch_routing.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

void tag(std::vector<ValidationRow>& rows, const char* metric, const Cluster& cluster) {
  rows.back().metric = metric;
  rows.back().gpu = cluster.gpu().name;
  rows.back().nodes = cluster.num_nodes();
}

namespace {

constexpr double KiB = 1024.0, MiB = KiB * 1024, GiB = MiB * 1024;
const char* kAic =
    "NVIDIA AIConfigurator measured tables for H100 SXM (github.com/ai-dynamo/aiconfigurator, "
    "systems/data/h100_sxm/";
const char* kMoeMiss =
    "open: too optimistic, not understood yet; not the MoE kernels (against TensorRT-LLM 1.3 MoE layer tables the "
    "model is slower, not faster), and not the batch limits (set as trtllm-bench's build heuristic computes them, "
    "which brings the TP2 row inside); candidate: TensorRT-LLM 0.17's older MoE plugin";
const char* kMlperf41 = "MLPerf Inference v4.1, NVIDIA closed, mlcommons/inference_results_v4.1 ";

double one_all_to_all(const StepExecutor& ex, int gpus, A2aMatrix matrix);

// Seconds of one collective over `gpus` GPUs (0..gpus−1) run as a one-operation step program
// (an all-reduce may run `kernels`' own, as an engine's step would).
double one_collective(const StepExecutor& ex, CollKind kind, int gpus, double bytes,
                      AllReduceKernels kernels = AllReduceKernels::Nccl) {
  // nccl-tests alltoall: each rank sends bytes/p to every rank (itself included, which is free).
  if (kind == CollKind::AllToAll) return one_all_to_all(ex, gpus, A2aMatrix::uniform(static_cast<std::size_t>(gpus), bytes / gpus));
  StepProgram p;
  std::vector<int> ranks;
  for (int g = 0; g < gpus; ++g) {
    p.rank_gpu.push_back(g);
    ranks.push_back(g);
  }
  int group = p.add_group(ranks);
  p.allreduce = kernels;
  StepOp op;
  op.type = OpType::Collective;
  op.cls = OpClass::TpComm;
  op.group = group;
  op.coll = kind;
  op.bytes = bytes;
  p.add(op, {});
  return ex.run(p).makespan;
}

// Seconds of one all-to-all over `gpus` GPUs (0..gpus−1) with the given per-pair bytes (op.bytes: their
// total per rank).
double one_all_to_all(const StepExecutor& ex, int gpus, A2aMatrix matrix) {
  StepProgram p;
  std::vector<int> ranks;
  for (int g = 0; g < gpus; ++g) {
    p.rank_gpu.push_back(g);
    ranks.push_back(g);
  }
  StepOp op;
  op.type = OpType::Collective;
  op.cls = OpClass::TpComm;
  op.group = p.add_group(ranks);
  op.coll = CollKind::AllToAll;
  double total = 0;
  for (const A2aMatrix::Entry& x : matrix.entries()) total += x.bytes;
  op.bytes = total / gpus;
  p.a2a.push_back(std::move(matrix));
  op.matrix = 0;
  p.add(op, {});
  return ex.run(p).makespan;
}

// --- kernels (executor-independent: the compute model itself) ---

// "gemm_bf16 curve (max_eff 0.82, half_rows 16, …)": what a kernel row set, read off the model.
std::string curve_text(const char* name, const KernelCurve& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s curve (max_eff %.2f, half_rows %.0f, hbm_eff %.2f, half_bytes %.0f MB, overlap_loss %.2f, %.0f µs)",
                name, c.max_eff, c.half_rows, c.hbm_eff, c.half_bytes / 1e6, c.overlap_loss, c.fixed * 1e6);
  return buf;
}

void kernel_rows(std::vector<ValidationRow>& rows) {
  const GpuSpec& h100 = gpu_preset("H100-SXM-80GB");
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // microbenchmarks run at boost clock
  auto add = [&](const std::string& name, ComputeKind kind, double shape, double flops, double bytes, Dtype math, double us,
                 const std::string& sets, const std::string& table, const char* setup) {
    double t = compute_time(h100, kind, shape, flops, bytes, math, cm);
    rows.push_back({name, "kernels", "µs", us, t * 1e6, 0.05, RowRole::Calibration, sets,
                    std::string(kAic) + table + ")", setup, ""});
  };
  const std::string bf = curve_text("gemm_bf16", cm.gemm_bf16) + ": fit to 2,500 shapes, RMS 6.7%";
  const std::string f8 = curve_text("gemm_fp8", cm.gemm_fp8) + ": fit to 2,500 shapes, RMS 10%";
  auto gemm = [&](const char* dt, Dtype math, double m, double n, double k, double us) {
    double wb = math == Dtype::FP8 ? 1 : 2;
    char name[96];
    std::snprintf(name, sizeof name, "H100 %s GEMM M=%.0f N=%.0f K=%.0f", dt, m, n, k);
    add(name, ComputeKind::Gemm, m, 2 * m * n * k, n * k * wb + m * k * wb + m * n * 2, math, us,
        math == Dtype::FP8 ? f8 : bf, "gemm/trtllm/1.3.0rc20/gemm_perf.parquet", "one GEMM, TensorRT-LLM Linear");
  };
  gemm("BF16", Dtype::BF16, 1, 8192, 8192, 49.2);
  gemm("BF16", Dtype::BF16, 1024, 8192, 8192, 190.7);
  gemm("BF16", Dtype::BF16, 4096, 5120, 8192, 435.4);
  gemm("FP8", Dtype::FP8, 1, 8192, 8192, 37.4);
  gemm("FP8", Dtype::FP8, 128, 8192, 8192, 42.5);
  gemm("FP8", Dtype::FP8, 4096, 5120, 8192, 319.2);
  // Attention with Llama-70B heads (64 query, 8 KV, dim 128).
  // Prompt attention in BF16, and in FP8 (FP8 Q/K/V on an FP8 KV cache: the table's attn_dtype fp8 rows).
  auto prefill = [&](double b, double s, Dtype math, double us) {
    const bool fp8 = math == Dtype::FP8;
    char name[96];
    std::snprintf(name, sizeof name, "H100 prefill attention b=%.0f s=%.0f (64/8 heads, %s)", b, s, fp8 ? "FP8" : "BF16");
    const std::string sets =
        fp8 ? curve_text("attn_prefill_fp8", cm.attn_prefill_fp8) +
                  ": over the table's 3,006 FP8 rows of head dim 128 with 8,192+ tokens, RMS 17.8% (the BF16 curve: 15.6% over its 2,972)"
            : curve_text("attn_prefill", cm.attn_prefill);
    add(name, ComputeKind::PrefillAttention, s, b * 2 * s * (s + 1) / 2 * 64 * 256, b * s * 2 * 8 * 128 * (fp8 ? 1 : 2) * 2, math,
        us, sets, "attention/trtllm/1.3.0rc20/context_attention_perf.parquet",
        fp8 ? "causal, one kernel, FP8 KV cache" : "causal, one kernel");
  };
  prefill(1, 8192, Dtype::BF16, 2165.35);
  prefill(1, 2048, Dtype::BF16, 209.16);
  prefill(1, 8192, Dtype::FP8, 1616.12);
  prefill(1, 2048, Dtype::FP8, 176.20);
  auto decode = [&](double b, double kv, double us) {
    char name[96];
    std::snprintf(name, sizeof name, "H100 decode attention b=%.0f KV=%.0f (64/8 heads, FP8 KV)", b, kv);
    add(name, ComputeKind::DecodeAttention, 1, b * 2 * kv * 64 * 256, b * kv * 2 * 8 * 128 * 1.0 /* FP8 KV */,
        Dtype::BF16, us, curve_text("attn_decode", cm.attn_decode),
        "attention/trtllm/1.3.0rc20/generation_attention_perf.parquet", "paged KV, one kernel");
  };
  decode(32, 8192, 185.61);
  decode(128, 2048, 185.29);
  // MLA decode (DeepSeek-V3: 128 query heads on one latent KV of 576 = 512 + 64 dims, values 512),
  // absorbed, BF16, at a compute-bound shape (heads × query tokens = 128): FlashMLA's published
  // 660 TFLOP/s on H800 SXM5, measured at the clock it throttles to (its write-up: ~1,600 MHz).
  {
    const GpuSpec& h800 = gpu_preset("H800");
    ComputeModel throttled;  // this kernel's figure is at the sustained clock, not at boost
    const double b = 128, kv = 4096, flops = b * 2 * 128 * kv * (576 + 512), bytes = b * kv * 576 * 2;
    const double us = flops / 660e12 * 1e6;
    const double t = compute_time(h800, ComputeKind::MlaDecodeAttention, 1, flops, bytes, Dtype::BF16, throttled);
    rows.push_back({"H800 MLA decode attention b=128 KV=4096 (128 heads, absorbed, BF16)", "kernels", "µs", us, t * 1e6, 0.05,
                    RowRole::Calibration, curve_text("attn_decode_mla", throttled.attn_decode_mla),
                    "FlashMLA (deepseek-ai/FlashMLA README, performance update 2025-04-22, and "
                    "docs/20250422-new-kernel-deep-dive.md): up to 660 TFLOP/s compute-bound on H800 SXM5",
                    "one kernel; its time is the published rate at this shape", ""});
  }
}

// --- collectives ---

struct CollPoint {
  CollKind kind;
  int gpus;
  double bytes;
  double us;
};

void collective_rows(const ExecutorFactory& make, std::vector<ValidationRow>& rows) {
  const std::string nccl = std::string(kAic) + "comm/nccl/2.29.2/nccl_perf.parquet), nccl-tests fp16, out-of-place";
  Cluster node = load_cluster("dgx-h100:1");
  auto ex = make(node);
  auto add = [&](const CollPoint& c, RowRole role, const std::string& source, const std::string& miss = "") {
    char name[96];
    std::snprintf(name, sizeof name, "%d×H100 %s %s", c.gpus, to_string(c.kind), binary_bytes(c.bytes).c_str());
    double t = one_collective(*ex, c.kind, c.gpus, c.bytes);
    rows.push_back({name, "collectives", "µs", c.us, t * 1e6, role == RowRole::Calibration ? 0.05 : 0.25, role, "",
                    source, "one collective on GPUs 0..p−1 of one DGX-H100", miss});
  };
  // Calibration: the all-to-all's call latency at 1 MiB on 8 GPUs (NCCL's all-to-all is send/recv
  // pairs, outside its tuning model), and the ring bandwidth of 2- and 4-GPU groups at 256 MiB.
  add(CollPoint{CollKind::AllToAll, 8, 1 * MiB, 15.61}, RowRole::Calibration, nccl);
  rows.back().sets = "a2a_call_latency (CollectiveModel)";
  for (const CollPoint& c : {CollPoint{CollKind::AllGather, 2, 256 * MiB, 548.55}, CollPoint{CollKind::AllGather, 4, 256 * MiB, 660.74}}) {
    add(c, RowRole::Calibration, nccl);
    rows.back().sets = "small_group_base / small_group_step (ring bandwidth of 2–4 GPU groups)";
  }
  // Checks on the same node, never fitted: all-reduce, all-gather and reduce-scatter are priced by
  // NCCL's own tuning model (its latencies and protocol caps; collective_cost.hpp) on the ring
  // bandwidth (NVLink efficiency 0.82 ≈ 370 GB/s) and NVLS figures (480 GB/s bus bandwidth, NCCL's
  // maintainers; ≈42 µs at 1 MiB, the Azure sweep), all sourced elsewhere.
  for (const CollPoint& c : {CollPoint{CollKind::AllReduce, 8, 1 * MiB, 25.40}, CollPoint{CollKind::AllGather, 8, 1 * MiB, 17.13},
                             CollPoint{CollKind::ReduceScatter, 8, 1 * MiB, 14.64}, CollPoint{CollKind::AllReduce, 2, 1 * MiB, 14.71},
                             CollPoint{CollKind::AllReduce, 8, 16 * MiB, 121.91}, CollPoint{CollKind::AllReduce, 8, 256 * MiB, 1092.10},
                             CollPoint{CollKind::AllGather, 8, 16 * MiB, 68.86}, CollPoint{CollKind::AllGather, 8, 256 * MiB, 728.79},
                             CollPoint{CollKind::AllToAll, 8, 16 * MiB, 75.66}, CollPoint{CollKind::AllToAll, 8, 256 * MiB, 763.91},
                             CollPoint{CollKind::AllReduce, 4, 1 * MiB, 18.13}, CollPoint{CollKind::AllGather, 4, 1 * MiB, 13.60},
                             CollPoint{CollKind::AllReduce, 2, 16 * MiB, 82.24}, CollPoint{CollKind::AllReduce, 4, 16 * MiB, 98.98},
                             CollPoint{CollKind::AllReduce, 4, 256 * MiB, 1181.0}, CollPoint{CollKind::AllGather, 4, 16 * MiB, 66.21},
                             CollPoint{CollKind::AllReduce, 8, 8 * KiB, 15.96}, CollPoint{CollKind::AllGather, 8, 8 * KiB, 10.62},
                             CollPoint{CollKind::AllGather, 2, 1 * MiB, 11.30}, CollPoint{CollKind::AllGather, 2, 16 * MiB, 56.00},
                             CollPoint{CollKind::AllToAll, 8, 8 * KiB, 7.53}})
    add(c, RowRole::Check, nccl);
  add(CollPoint{CollKind::AllReduce, 2, 256 * MiB, 881.30}, RowRole::Check, nccl,
      "the small-group bandwidth penalty is fitted on all-gathers (245 GB/s bus bandwidth on 2 GPUs); 2-GPU "
      "all-reduces reach 305 GB/s, so the penalty overshoots them at large sizes. Not NVLS, which NCCL enables from 2 "
      "GPUs: it moves 1.5 S through each GPU's port there, at least 895 us at NVLink's 450 GB/s peak");
  // Checks across nodes: 4 × DGX-H100 on NDR InfiniBand.
  Cluster four = load_cluster("dgx-h100:4");
  auto ex4 = make(four);
  const std::string vp = "Voltage Park 4×8 H100, NDR IB, NCCL 2.24.3 (github.com/ZiyanIshani/vpbenchmarking, "
                         "results/nccl/nccl_multinode/nccl_allreduce_20260224_225706.txt)";
  for (auto [bytes, us] : {std::pair{1 * MiB, 92.47}, std::pair{16 * MiB, 272.07}, std::pair{128 * MiB, 944.74},
                           std::pair{8 * GiB, 50291.8}}) {
    double t = one_collective(*ex4, CollKind::AllReduce, 32, bytes);
    // NCCL's tuner prices its choice here (tree, LL128) at 186 µs; the run took 272 — on the
    // Simple protocol, by the shape of its own curve (shardsim collective prints every candidate).
    std::string miss = bytes == 16 * MiB ? "open, measured in part: NCCL's own tuning model, which this price follows, keeps tree "
                                           "with LL128 from 512 KiB to 32 MiB (186 µs here); the run did not. Its curve jumps 1.7x "
                                           "from 1 to 2 MiB (92 to 155 µs) and from 2 to 32 MiB follows the Simple protocol: tree "
                                           "Simple is priced at -9/-2/-20/-3/+10% of its 2/4/8/16/32 MiB points (265 µs here), "
                                           "tree LL128 at -43/-38/-45/-32/-18%. So NCCL 2.24.3 left LL128 at 2 MiB on that cluster. "
                                           "Why is not in the source: NCCL enables LL128 by default only where a GPU reaches its NIC "
                                           "through PCIe switches or PXN (src/graph/tuning.cc), and the run does not print the path"
                                         : "";
    rows.push_back({"32×H100 (4 nodes) all-reduce " + binary_bytes(bytes), "collectives", "µs", us, t * 1e6, 0.25,
                    RowRole::Check, "", vp, "one all-reduce over 4 DGX-H100 on a rail-optimised NDR fat-tree", miss});
  }
}

// The engines' own all-reduce kernels (CustomAllReduce, collective_cost.hpp) against
// AIConfigurator's measured custom all-reduce tables (embedded topologies/data/
// custom_allreduce_tables.json: BF16, CUDA-graph replay, the points where the kernels beat NCCL,
// up to the engine's workspace). One row per engine and GPU: the geometric mean of the table's
// latencies beside the model's for the same group sizes and bytes, with the RMS log error. The
// constants were fitted on the H100 and B200 tables (calibration rows); the H200 tables, never
// fitted, check them.
void custom_allreduce_rows(const ExecutorFactory& make, std::vector<ValidationRow>& rows) {
  constexpr const char* kFile = "topologies/data/custom_allreduce_tables.json";
  const std::string source = std::string("embedded:") + kFile;
  const auto text = embedded_file(kFile);
  if (!text) throw InputError(source, "", "missing from the binary (re-run cmake)");
  const json doc = parse_json(*text, source);
  for (const json& t : doc.at("tables")) {
    const std::string engine = t.at("engine"), gpu = t.at("gpu"), role = t.at("role");
    EngineSettings e;
    set_engine_key(e, "allreduce", engine, source);
    std::string lower = gpu;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const Cluster node = load_cluster("dgx-" + lower + ":1");
    const auto ex = make(node);
    LogAgreement fit;
    for (const json& row : t.at("rows")) {
      const int gpus = row.at(0).get<int>();
      const double bytes = row.at(1).get<double>(), measured = row.at(2).get<double>() * 1e-3;
      fit.add(measured, one_collective(*ex, CollKind::AllReduce, gpus, bytes, e.allreduce));
    }
    if (fit.n == 0) continue;
    const int n = fit.n;
    const double rms = fit.rms();
    const bool calibration = role == "calibration";
    const std::string label = engine == "trtllm" ? "TensorRT-LLM" : engine == "vllm" ? "vLLM" : "SGLang";
    char name[160], setup[260];
    std::snprintf(name, sizeof name, "%s %s custom all-reduce, %d sizes on 2-8 GPUs (geometric mean)", gpu.c_str(),
                  label.c_str(), n);
    std::snprintf(setup, sizeof setup,
                  "one all-reduce on GPUs 0..p−1 of one DGX-%s with %s's kernels (allreduce=%s) over the table's %d rows "
                  "(RMS log error %.1f%%)",
                  gpu.c_str(), label.c_str(), engine.c_str(), n, 100 * rms);
    rows.push_back({name, "collectives", "µs", fit.measured() * 1e6, fit.model() * 1e6,
                    calibration ? 0.05 : 0.25, calibration ? RowRole::Calibration : RowRole::Check,
                    calibration ? "CustomAllReduce (" + engine +
                                      "): base latency per NVLink generation, per-peer latencies, one- and two-shot efficiency"
                                : std::string(),
                    "NVIDIA AIConfigurator measured tables (github.com/ai-dynamo/aiconfigurator, aic-core/src/aiconfigurator_core/" +
                        t.at("file").get<std::string>() + "), BF16, CUDA graphs",
                    setup, ""});
  }
}

// Cross-node expert-parallel all-to-alls: DeepEP's low-latency kernels on H800 nodes with one
// CX7 400 Gb/s NIC per GPU, DeepSeek-V3/R1's decode setting: 128 tokens per rank, hidden 7,168,
// top-8 of 256 experts spread evenly over the EP ranks, dispatch in FP8 (7,168 bytes + 56 FP32
// scales per copy), combine in BF16; one copy per (token, expert), sent straight to the expert's
// rank (no node-level deduplication, no forwarding). Uniform routing: every rank sends each other
// rank 128 × 8 / EP copies. Published as latency per call (deepseek-ai/DeepEP, docs/legacy.md,
// "Low-latency kernels with pure RDMA").
void expert_all_to_all_rows(const ExecutorFactory& make, std::vector<ValidationRow>& rows) {
  const std::string src = "DeepEP V1 low-latency kernels, H800 + CX7 400 Gb/s IB (deepseek-ai/DeepEP docs/legacy.md, "
                          "\"Low-latency kernels with pure RDMA\": 128 tokens per batch, 7168 hidden, top-8, FP8 dispatch, BF16 combine)";
  struct Point {
    int ep;
    double dispatch_us, combine_us;
  };
  const double tokens = 128, topk = 8, hidden = 7168;
  const double dispatch_bytes = hidden + hidden / 128 * 4, combine_bytes = hidden * 2;
  for (const Point& p : {Point{8, 77, 114}, Point{16, 118, 195}, Point{32, 155, 273}, Point{64, 173, 314}, Point{128, 192, 369},
                         Point{256, 194, 360}}) {
    const std::string spec = "dgx-h100:" + std::to_string(p.ep / 8) + ",gpu=H800";
    const Cluster c = load_cluster(spec);
    auto ex = make(c);
    for (int combine = 0; combine < 2; ++combine) {
      const double per_rank = tokens * topk * (combine ? combine_bytes : dispatch_bytes);
      const double t = one_collective(*ex, CollKind::AllToAll, p.ep, per_rank);
      char name[120];
      std::snprintf(name, sizeof name, "%d×H800 (%d node%s) EP%d low-latency %s, 128 tokens/rank", p.ep, p.ep / 8,
                    p.ep > 8 ? "s" : "", p.ep, combine ? "combine (BF16)" : "dispatch (FP8)");
      rows.push_back({name, "expert all-to-all", "µs", combine ? p.combine_us : p.dispatch_us, t * 1e6, 0.20, RowRole::Check, "", src,
                      "one all-to-all over " + spec + ": " + readable(per_rank / 1e6, 3) + " MB per rank, spread evenly over the " +
                          std::to_string(p.ep) + " ranks",
                      ""});
    }
  }
}

// DeepEP's normal (prefill) kernels across nodes, as its internode test runs them (tests/legacy/
// test_internode.py): 4,096 tokens per rank, hidden 7,168, 256 experts spread evenly over the EP
// ranks, each token's scores |N(0,1)| + 1, its top min(nodes, 4) nodes by their best expert's
// score, its top 8 experts inside those; dispatch in FP8 (7,168 + 4 × 56 scale bytes a copy),
// combine in BF16. The kernels send a token once per destination node over RDMA (to the GPU on
// the sender's rail there) and forward it over NVLink; the published "bottleneck bandwidth" is
// those RDMA bytes — tokens × distinct nodes, the sender's own included — over the kernel's time,
// so the time is bytes ÷ bandwidth. The rows price the model's node-level all-to-all of the same
// routing (node_level_flows, what a prompt step's all-to-all runs as under a2a=auto); the setup
// says what the per-rank one (one copy per destination rank) gave.
struct NormalKernelRouting {
  double nodes_per_token = 0;  // distinct destination nodes of a token (the test's num_rdma_token_sent ÷ tokens)
  double ranks_per_token = 0;  // distinct destination ranks
};

// The test's routing drawn for `samples` tokens (seeded: the same figures every run).
NormalKernelRouting normal_kernel_routing(int ep, int samples) {
  const int experts = 256, topk = 8, nodes = ep / 8, groups = std::min(nodes, 4), per_rank = experts / ep,
            per_node = experts / nodes;
  std::mt19937_64 rng(43);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> score(static_cast<std::size_t>(experts));
  std::vector<int> node_order(static_cast<std::size_t>(nodes)), expert_order;
  NormalKernelRouting out;
  for (int t = 0; t < samples; ++t) {
    for (double& x : score) x = std::fabs(normal(rng)) + 1;
    std::vector<double> best(static_cast<std::size_t>(nodes), 0.0);
    for (int e = 0; e < experts; ++e) best[static_cast<std::size_t>(e / per_node)] = std::max(best[static_cast<std::size_t>(e / per_node)], score[static_cast<std::size_t>(e)]);
    std::iota(node_order.begin(), node_order.end(), 0);
    std::partial_sort(node_order.begin(), node_order.begin() + groups, node_order.end(),
                      [&](int a, int b) { return best[static_cast<std::size_t>(a)] > best[static_cast<std::size_t>(b)]; });
    expert_order.clear();
    for (int g = 0; g < groups; ++g)
      for (int e = node_order[static_cast<std::size_t>(g)] * per_node; e < (node_order[static_cast<std::size_t>(g)] + 1) * per_node; ++e)
        expert_order.push_back(e);
    std::partial_sort(expert_order.begin(), expert_order.begin() + topk, expert_order.end(),
                      [&](int a, int b) { return score[static_cast<std::size_t>(a)] > score[static_cast<std::size_t>(b)]; });
    std::vector<char> rank_hit(static_cast<std::size_t>(ep), 0), node_hit(static_cast<std::size_t>(nodes), 0);
    for (int k = 0; k < topk; ++k) {
      const int e = expert_order[static_cast<std::size_t>(k)];
      rank_hit[static_cast<std::size_t>(e / per_rank)] = 1;
      node_hit[static_cast<std::size_t>(e / per_node)] = 1;
    }
    out.ranks_per_token += std::accumulate(rank_hit.begin(), rank_hit.end(), 0);
    out.nodes_per_token += std::accumulate(node_hit.begin(), node_hit.end(), 0);
  }
  out.ranks_per_token /= samples;
  out.nodes_per_token /= samples;
  return out;
}

void normal_kernel_rows(const ExecutorFactory& make, std::vector<ValidationRow>& rows) {
  const std::string src = "DeepEP V1 normal kernels, H800 + CX7 400 Gb/s IB (deepseek-ai/DeepEP docs/legacy.md, \"Normal kernels "
                          "with NVLink and RDMA forwarding\": 4096 tokens per batch, 7168 hidden, top-4 groups, top-8 experts, FP8 "
                          "dispatch, BF16 combine; bytes as tests/legacy/test_internode.py counts them)";
  struct Point {
    int ep;
    double dispatch_gbs, combine_gbs;  // published RDMA bottleneck bandwidth
  };
  const double tokens = 4096, hidden = 7168;
  const double dispatch_bytes = hidden * (1 + 4.0 / 128), combine_bytes = hidden * 2;
  for (const Point& p : {Point{16, 43, 43}, Point{32, 58, 57}, Point{64, 51, 50}}) {
    const NormalKernelRouting route = normal_kernel_routing(p.ep, 20000);
    const std::string spec = "dgx-h100:" + std::to_string(p.ep / 8) + ",gpu=H800";
    const Cluster c = load_cluster(spec);
    auto ex = make(c);
    // Every rank sends alike (the routing ignores the sender): its copies spread evenly.
    const auto U = static_cast<std::size_t>(p.ep);
    std::vector<int> gpus(U);
    std::iota(gpus.begin(), gpus.end(), 0);
    const UnitNodes un = unit_nodes_of(c, gpus);
    const auto N = static_cast<std::size_t>(un.nodes);
    std::vector<double> copies(U * U, tokens * route.ranks_per_token / p.ep), node_copies(U * N, tokens * route.nodes_per_token / un.nodes), flow;
    node_level_flows(U, un, copies, node_copies, flow);
    for (int combine = 0; combine < 2; ++combine) {
      const double copy = combine ? combine_bytes : dispatch_bytes;
      const double published_s = tokens * route.nodes_per_token * copy / ((combine ? p.combine_gbs : p.dispatch_gbs) * 1e9);
      A2aMatrix m;
      flow_matrix(U, flow, [copy](double f) { return f * copy; }, combine != 0, m);
      const double t = one_all_to_all(*ex, p.ep, std::move(m));
      const double per_rank = one_collective(*ex, CollKind::AllToAll, p.ep, tokens * route.ranks_per_token * copy);
      char name[140], setup[480];
      std::snprintf(name, sizeof name, "%d×H800 (%d nodes) EP%d normal %s, 4096 tokens/rank", p.ep, p.ep / 8, p.ep,
                    combine ? "combine (BF16)" : "dispatch (FP8)");
      std::snprintf(setup, sizeof setup,
                    "one node-level all-to-all over %s: %.2f destination nodes and %.2f ranks per token (the test's routing, "
                    "20,000 tokens drawn), one RDMA copy per node to the sender's rail there, forwarded over NVLink; "
                    "published time = %s MB of RDMA ÷ %.0f GB/s; sent once per destination rank instead: %s µs",
                    spec.c_str(), route.nodes_per_token, route.ranks_per_token,
                    readable(tokens * route.nodes_per_token * copy / 1e6, 3).c_str(), combine ? p.combine_gbs : p.dispatch_gbs,
                    readable(per_rank * 1e6, 3).c_str());
      ValidationRow row{name, "expert all-to-all", "µs", published_s * 1e6, t * 1e6, 0.20, RowRole::Check, "", src, setup, ""};
      if (!row.within())
        row.known_miss = "open: the model's busiest NIC carries what DeepEP's does (one RDMA copy per token and node); "
                         "the published EP32 bandwidth (58 GB/s) is the highest of the three, which the model's one NIC "
                         "efficiency does not follow";
      rows.push_back(row);
    }
  }
}

// --- end to end ---

struct EndToEnd {
  std::string name, model, cluster, plan, trace;
  int requests = 0;
  bool offline = true;
  bool steady = true;          // MLPerf: steady-state tokens/s; trtllm-bench: over the makespan
  int per_group = 1;           // published figure is per engine of this many replicas (trtllm-bench rows)
  double tok_s = 0;            // published output tokens/s (0 = not a row)
  double ttft50 = 0, ttft99 = 0, tpot50 = 0, tpot99 = 0;  // published, ms (0 = none)
  std::string source, known_miss_tok, known_miss_latency;
};

// OpenOrca as the MLPerf Llama-2-70B dataset: lognormal prompts and outputs with the published
// means and medians (σ² = 2 ln(mean/median)), clamped to its limits (docs/references.md §V).
std::string openorca(int n, double rate) {
  double sp = std::sqrt(2 * std::log(222.3 / 152)), so = std::sqrt(2 * std::log(290.3 / 262));
  char spec[256];
  std::snprintf(spec, sizeof spec,
                "synthetic:n=%d,%sprompt=lognormal:222.3:%.4f:1024,output=lognormal:290.3:%.4f:1024,seed=7", n,
                rate > 0 ? ("rate=" + std::to_string(rate) + ",arrival=poisson,").c_str() : "", sp, so);
  return spec;
}

std::vector<EndToEnd> end_to_end_cases(double scale) {
  auto n = [scale](int x) { return std::max(200, static_cast<int>(x * scale)); };
  const std::string mlperf_h100 =
      "tp=2,dp=4,weights=fp8,act=fp8,kv=fp8,engine=trtllm-mlperf,max_batch_tokens=4096,kv_free_fraction=0.9,max_context=2048";
  const std::string mlperf_h200 =
      "tp=1,dp=8,weights=fp8,act=fp8,kv=fp8,engine=trtllm-mlperf,max_batch_tokens=4096,kv_free_fraction=0.9,max_context=2048";
  const std::string trt = "weights=fp8,act=fp8,kv=fp8,engine=trtllm,kv_free_fraction=0.95,max_output=1000,max_context=2048";
  const std::string bench = "TensorRT-LLM perf overview v0.17 (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md), "
                            "trtllm-bench, FP8, 1000/1000 tokens, 3000 requests";
  std::vector<EndToEnd> c;
  c.push_back({"Llama-2-70B Offline, DGX-H100 (TP2×4, FP8)", "llama2-70b", "dgx-h100:1", mlperf_h100 + ",max_seqs=896",
               openorca(n(24576), 0), n(24576), true, true, 1, 24524.9, 0, 0, 0, 0,
               std::string(kMlperf41) + "closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Offline", "", ""});
  c.push_back({"Llama-2-70B Server 75 q/s, DGX-H100 (TP2×4, FP8)", "llama2-70b", "dgx-h100:1", mlperf_h100 + ",max_seqs=1024",
               openorca(n(24576), 75), n(24576), false, true, 1, 21605.79, 273.0, 461.3, 156.4, 175.4,
               std::string(kMlperf41) + "closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Server", "",
               "open: the measured Server run holds ≈840 sequences per engine at 155 ms per iteration (Little's law) "
               "while the simulated engines keep up with ≈260 at 48 ms; at 89% of the Offline rate the operating "
               "point is steep in any per-iteration cost: measured, a host cost of 22 ms per iteration "
               "(step_overhead_ms=22) gives TPOT p50/p99 134/150 ms and TTFT p50/p99 198/373 ms here and keeps the "
               "Offline row inside (-8.4%), 17 ms gives 115 ms TPOT p50. What a TP2 engine spends it on is not "
               "published (NVIDIA's harness settings differ from Offline only in batch 1,024 vs 896; the TP1 H200 "
               "rows, same harness, are inside without it); not fitted, since that would make this a calibration row"});
  c.push_back({"Llama-2-70B Offline, 8×H200 (TP1×8, FP8)", "llama2-70b", "dgx-h200:1", mlperf_h200 + ",max_seqs=806",
               openorca(n(24576), 0), n(24576), true, true, 1, 31302.7, 0, 0, 0, 0,
               std::string(kMlperf41) + "closed/NVIDIA/results/H200-SXM-141GBx8_TRT/llama2-70b-99/Offline", "", ""});
  c.push_back({"Llama-2-70B Server 101 q/s, 8×H200 (TP1×8, FP8)", "llama2-70b", "dgx-h200:1", mlperf_h200 + ",max_seqs=896",
               openorca(n(24576), 101), n(24576), false, true, 1, 29228.22, 180.8, 452.7, 124.3, 146.0,
               std::string(kMlperf41) + "closed/NVIDIA/results/H200-SXM-141GBx8_TRT/llama2-70b-99/Server", "", ""});
  const std::string fixed = "synthetic:n=%N%,prompt=fixed:1000,output=fixed:1000,seed=7";
  auto fixed_n = [&](int x) {
    std::string s = fixed;
    s.replace(s.find("%N%"), 3, std::to_string(x));
    return s;
  };
  // The engines' batch limits as trtllm-bench's build heuristic sets them from the model, the
  // mapping and the dataset (tensorrt_llm/bench/build/tuning.py, calc_engine_setting and
  // finetune_setting): the requests of ISL + OSL tokens that 0.95 of the GPUs' memory beyond the
  // FP8 weights holds in FP8 KV, capped at 4,096 and rounded up (×128 below 1,024, ×256 above);
  // max_num_tokens = that × (1 + ISL/OSL), at least 2,048, rounded up. Mixtral-8x7B: 46.7 GB of
  // weights, 64 KiB of KV per token; on 2 H100s 876 requests → 896 / 2,048; on 8, 4,592 → 4,096 /
  // 8,192. Mixtral-8x22B: 140.6 GB, 112 KiB per token; on 8, 2,207 → 2,304 / 4,608.
  c.push_back({"Mixtral-8x7B TP2, H100 (trtllm-bench)", "mixtral-8x7b", "dgx-h100:1",
               "tp=2,dp=4,max_seqs=896,max_batch_tokens=2048," + trt, fixed_n(4 * n(3000)), 4 * n(3000), true, false, 4,
               15770.89, 0, 0, 0, 0, bench, "", ""});
  c.push_back({"Mixtral-8x7B TP8, H100 (trtllm-bench)", "mixtral-8x7b", "dgx-h100:1",
               "tp=8,max_seqs=4096,max_batch_tokens=8192," + trt, fixed_n(n(3000)), n(3000), true, false, 1, 40631.71, 0, 0,
               0, 0, bench, kMoeMiss, ""});
  c.push_back({"Mixtral-8x22B TP8, H100 (trtllm-bench)", "mixtral-8x22b", "dgx-h100:1",
               "tp=8,max_seqs=2304,max_batch_tokens=4608," + trt, fixed_n(n(3000)), n(3000), true, false, 1, 16573.24, 0, 0,
               0, 0, bench, kMoeMiss, ""});
  return c;
}

void end_to_end_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows) {
  for (const EndToEnd& e : end_to_end_cases(opt.request_scale)) {
    ModelSpec model = load_model(e.model);
    Cluster cluster = load_cluster(e.cluster);
    Plan plan = plan_from_string(e.plan, cluster.num_gpus(), plan_defaults(model));
    RequestTrace trace = load_request_trace(e.trace);
    ServingOptions so;
    so.offline = e.offline;
    if (opt.exact) so.set_exact();
    // MoE rows: the default synthetic routing (balanced-trained experts, mild skew).
    std::unique_ptr<RoutingSource> routing;
    if (model.is_moe()) routing = make_routing("synthetic:seed=7", model.routing_shape());
    ServingResult r = serve_row(make, opt, plan, model, cluster, e.cluster, trace, routing.get(), so);
    Metrics m = summarize(r, so, cluster.num_gpus());
    std::string setup = e.model + " on " + e.cluster + ", plan " + plan_to_string(plan) + ", " + std::to_string(e.requests) +
                        (e.offline ? " requests at t=0" : " requests, Poisson arrivals") + ", trace " + e.trace;
    double tok = (e.steady ? m.steady_output_tok_s : m.output_tok_s) / e.per_group;
    rows.push_back({e.name + (e.steady ? ", steady tok/s" : ", tok/s over the run"), "end-to-end throughput", "tok/s", e.tok_s,
                    tok, 0.10, RowRole::Check, "", e.source, setup, e.known_miss_tok});
    tag(rows, "throughput", cluster);
    auto lat = [&](const char* what, double pub, double sim) {
      if (pub <= 0) return;
      rows.push_back({e.name + ", " + what, "server latency", "ms", pub, sim, 0.25, RowRole::Check, "", e.source, setup,
                      e.known_miss_latency});
      tag(rows, what, cluster);
    };
    lat("TTFT p50", e.ttft50, m.ttft_ms.p50);
    lat("TTFT p99", e.ttft99, m.ttft_ms.p99);
    lat("TPOT p50", e.tpot50, m.tpot_ms.p50);
    lat("TPOT p99", e.tpot99, m.tpot_ms.p99);
  }
}

// SGLang's DeepSeek-V3 deployment with prefill and decode pools on H100 (lmsys.org/blog/2025-05-05-
// large-scale-ep, "Performance Analysis of Prefill and Decode Phases"): each phase measured alone,
// "assuming unlimited resources for the non-tested phase". Both pools: DP attention over every GPU,
// EP over every GPU with 32 redundant experts placed from the routing's loads (EPLB), two-batch
// overlap, FP8 (W8A8) weights, SGLang engine. Prefill: 4 nodes, EP32, 16,384 tokens per GPU per
// batch, CUDA graphs off (DeepEP normal dispatch); input tokens/s per node for 1K, 2K and 4K prompts.
// Decode: 9 nodes, EP72 (256 + 32 = 288 slots), 256 sequences per GPU with 2,000-token contexts,
// every request's KV already there at t = 0 (unlimited prefill); output tokens/s per node, steady state.
void disaggregated_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows) {
  const std::string src = "SGLang team, \"Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on "
                          "96 H100 GPUs\", lmsys.org/blog/2025-05-05-large-scale-ep (May 2025), phases measured alone";
  const ModelSpec model = load_model("deepseek-v3");
  const std::unique_ptr<RoutingSource> routing = make_routing("synthetic:seed=7", model.routing_shape());
  // DeepEP as the deployment ran it — the prefill pool on its normal kernels, the decode pool on its
  // low-latency ones: a2a=auto gives prompt steps node-level all-to-alls, decode-only steps per-rank ones.
  const std::string common = "redundant_experts=32,two_batch_overlap=on,engine=sglang,a2a=auto";
  const Cluster c13 = load_cluster("dgx-h100:13");
  const Plan plan = plan_from_string("prefill:attn_dp=32,ep=32," + common + ",cuda_graphs=off,max_batch_tokens=524288,"
                                     "prefill_chunk=16384/decode:attn_dp=72,ep=72," + common + ",max_seqs=18432,max_batch_tokens=18432",
                                     c13.num_gpus(), plan_defaults(model));
  auto scaled = [&](int n) { return std::max(200, static_cast<int>(n * opt.request_scale)); };
  ServingOptions so;
  so.offline = true;
  if (opt.exact) so.set_exact();
  {  // the prefill pool alone, as phase 1 of a disaggregated run serves it
    const Cluster four = load_cluster("dgx-h100:4");
    const Plan pool = prefill_pool(plan);
    // With a2a=auto the prompt steps' all-to-alls run node-level, as DeepEP's normal kernels do (the
    // six normal-kernel check rows price that within 5%). Priced per rank (a2a=per-rank), the NICs
    // carried twice the bytes, dispatch and combine were 97% of the step's critical path and the 1K
    // row read −12.9% (2K −8.4%, 4K −1.6%): inside by compensating errors.
    const std::string open_miss =
        "open; measured in part: SGLang's own ablation ran the 4K case with perfectly balanced experts (random experts "
        "under the group-limited rule) at 59,337 tok/s per node, 18% above the 50,302 of its default expert "
        "distribution, while the simulated routing (synthetic, EPLB-placed) is nearly balanced (the slowest EP rank 7% "
        "above the mean in expert time; 67,013 tok/s, uniform routing 67,586): about 18 of the 4K row's 33 points are "
        "the expert imbalance of the prompts the benchmark sent, which the model is not given; against the balanced "
        "run it reads +13.9% and against DeepSeek's own profile +6.9% (the two rows below). The all-to-alls run "
        "node-level as DeepEP's normal kernels do (its six normal-kernel check rows within 5%), holding DeepEP's default "
        "20 SMs while the two-batch-overlapped compute runs (comm_sms; without them +41.7% / +45.4% / +49.1%)";
    for (auto [len, published] : {std::pair{1024, 57674.0}, std::pair{2048, 54543.0}, std::pair{4096, 50302.0}}) {
      const int n = scaled(8 * 524288 / len);  // eight full batches of the pool
      const std::string spec = "synthetic:n=" + std::to_string(n) + ",prompt=fixed:" + std::to_string(len) + ",output=fixed:1,seed=7";
      const RequestTrace trace = prefill_trace(load_request_trace(spec));
      const ServingResult r = serve_row(make, opt, pool, model, four, "dgx-h100:4", trace, routing.get(), so);
      double tokens = 0;
      for (const auto& q : r.requests) tokens += q.completed ? q.prompt_tokens : 0;
      rows.push_back({"DeepSeek-V3 prefill pool, 4×8 H100 EP32, " + std::to_string(len / 1024) + "K prompts, input tok/s per node",
                      "end-to-end throughput", "tok/s", published, r.makespan > 0 ? tokens / r.makespan / 4 : 0, 0.10,
                      RowRole::Check, "", src,
                      "prefill pool " + plan_to_string(pool) + " on dgx-h100:4, " + std::to_string(n) +
                          " requests at t=0, trace " + spec + ", routing synthetic:seed=7; over the run",
                      ""});
      if (!rows.back().within()) rows.back().known_miss = open_miss;
      tag(rows, "throughput", four);
    }
    // The 4K case as the blog's "Profile Results" ran it against DeepSeek's (16,384 tokens per GPU,
    // 4,096-token prompts, the same pool): with "simulated perfect EPLB" — random experts under the
    // group-limited routing rule, routing "uniform" here — SGLang served 59,337 tok/s per node; DeepSeek's
    // profile (github.com/deepseek-ai/profile-data: 4×8 H800, EP32, its own engine, two micro-batches),
    // as the blog derives a throughput from it, 62,713. Set up alike: the balanced run with uniform
    // routing; the profile on H800 nodes with the EPLB-placed synthetic routing (its distribution is not
    // published; the blog finds it close to balanced: SGLang's balanced run is within 5% of it).
    const std::string spec4k = "synthetic:n=" + std::to_string(scaled(8 * 524288 / 4096)) + ",prompt=fixed:4096,output=fixed:1,seed=7";
    const RequestTrace trace4k = prefill_trace(load_request_trace(spec4k));
    const std::unique_ptr<RoutingSource> uniform = make_routing("uniform", model.routing_shape());
    const std::string h800 = "dgx-h100:4,gpu=H800";
    const Cluster four_h800 = load_cluster(h800);
    struct Balanced {
      const char* name;
      const Cluster* cluster;
      std::string cluster_spec;
      const RoutingSource* routing;
      const char* routing_spec;
      double published;
      std::string source;
    };
    const Balanced cases[] = {
        {"DeepSeek-V3 prefill pool, 4×8 H100 EP32, 4K prompts, balanced experts (SGLang's simulated perfect EPLB)", &four,
         "dgx-h100:4", uniform.get(), "uniform", 59337.0, src + ", Profile Results: SGLang + Simulated Perfect EPLB"},
        {"DeepSeek-V3 prefill, DeepSeek's profile (4×8 H800 EP32, 4K prompts)", &four_h800, h800, routing.get(),
         "synthetic:seed=7", 62713.0,
         src + ", Profile Results: DeepSeek Profile (from github.com/deepseek-ai/profile-data, as the blog derives it)"}};
    const std::string balanced_miss =
        "open: the blog finds both DeepSeek's and SGLang's communication kernels slower under two-batch overlap than in "
        "DeepEP's unit tests (which they match only with TBO off); the model prices them at unit-test speed (the six "
        "normal-kernel check rows, within 5%)";
    for (const Balanced& b : cases) {
      const ServingResult r = serve_row(make, opt, pool, model, *b.cluster, b.cluster_spec, trace4k, b.routing, so);
      double tokens = 0;
      for (const auto& q : r.requests) tokens += q.completed ? q.prompt_tokens : 0;
      rows.push_back({std::string(b.name) + ", input tok/s per node", "end-to-end throughput", "tok/s", b.published,
                      r.makespan > 0 ? tokens / r.makespan / 4 : 0, 0.10, RowRole::Check, "", b.source,
                      "prefill pool " + plan_to_string(pool) + " on " + b.cluster_spec + ", " +
                          std::to_string(trace4k.requests.size()) + " requests at t=0, trace " + spec4k + ", routing " +
                          b.routing_spec + "; over the run",
                      ""});
      if (!rows.back().within()) rows.back().known_miss = balanced_miss;
      tag(rows, "throughput", *b.cluster);
    }
  }
  // The decode pool alone: every request's KV is there at t = 0. "KV cache length 2,000": prompts of
  // 1,900 tokens and 100 output tokens (256 × 2,000 tokens fill the KV pool the memory model leaves
  // each GPU, 514,384 tokens). With and without two-batch overlap: the TBO ablation reports a 25.5%
  // speedup at 256 sequences per GPU, reaching 22,310 tok/s (so 22,310 / 1.255 without it).
  const Cluster nine = load_cluster("dgx-h100:9");
  const int n = scaled(3 * 18432);  // three turnovers of 256 sequences on each of 72 GPUs
  const std::string spec = "synthetic:n=" + std::to_string(n) + ",prompt=fixed:1900,output=fixed:100,seed=7";
  const RequestTrace trace = load_request_trace(spec);
  // Inside target while the host's per-sequence cost was charged once for the engine's 18,432
  // sequences in series (18.6 ms of a step); SGLang runs one scheduler per attention-DP rank.
  const std::string decode_miss =
      "open: too fast since the host's per-sequence cost is charged per attention-DP scheduler (256 sequences, not the "
      "engine's 18,432 in series: that charge added 18.6 ms to each step and hid this gap; issue 42); the simulated "
      "step spends 53% of its time on the cross-node combine, which the EP64/EP128 low-latency check rows above price "
      "4-13% below DeepEP's published kernels, so it accounts for about 5 of these points; MLA decode attention is priced at FlashMLA's published "
      "660 TFLOP/s (it was the grouped-query curve's 432, which put this row at +31.1% / +15.2%), and the blog does not "
      "say which MLA kernel SGLang ran";
  for (bool tbo : {true, false}) {
    Plan pool = plan.decode();
    pool.first_gpu = 0;
    pool.engine.two_batch_overlap = tbo;
    ServingOptions dso = so;  // offline: every request handed over at t = 0 (`simulate --prefilled --offline`)
    dso.prefilled = true;
    const ServingResult r = serve_row(make, opt, pool, model, nine, "dgx-h100:9", trace, routing.get(), dso);
    const Metrics m = summarize(r, dso, nine.num_gpus());
    rows.push_back({std::string("DeepSeek-V3 decode pool, 9×8 H100 EP72, 256 seqs/GPU × 2K context") + (tbo ? "" : ", no TBO") +
                        ", output tok/s per node",
                    "end-to-end throughput", "tok/s", tbo ? 22282.0 : 22310.0 / 1.255, m.steady_output_tok_s / 9, 0.10,
                    RowRole::Check, "", src + (tbo ? "" : "; TBO ablation: 22,310 tok/s with TBO, a 25.5% speedup"),
                    "decode pool " + plan_to_string(pool) + " on dgx-h100:9, " + std::to_string(n) +
                        " requests handed over prefilled at t=0, trace " + spec + ", routing synthetic:seed=7; steady state",
                    decode_miss});
    tag(rows, "throughput", nine);
  }
}

}  // namespace

ServingResult serve_row(const ExecutorFactory& make, const ValidationOptions& opt, const Plan& plan, const ModelSpec& model,
                        const Cluster& cluster, const std::string& cluster_spec, const RequestTrace& trace,
                        const RoutingSource* routing, const ServingOptions& so) {
  if (opt.serve) return opt.serve(plan, model, cluster, cluster_spec, trace, routing, so);
  const auto ex = make(cluster);
  return serve(plan, model, cluster, trace, routing, *ex, so);
}

std::vector<ErrorSummary> summarize_errors(const std::vector<ValidationRow>& rows) {
  std::vector<std::string> metrics, gpus;
  for (const auto& r : rows) {
    if (r.metric.empty() || r.role != RowRole::Check) continue;
    if (std::find(metrics.begin(), metrics.end(), r.metric) == metrics.end()) metrics.push_back(r.metric);
    if (std::find(gpus.begin(), gpus.end(), r.gpu) == gpus.end()) gpus.push_back(r.gpu);
  }
  std::vector<std::pair<std::string, std::function<bool(const ValidationRow&)>>> scopes = {
      {"all", [](const ValidationRow&) { return true; }},
      {"single-node", [](const ValidationRow& r) { return r.nodes <= 1; }},
      {"multi-node", [](const ValidationRow& r) { return r.nodes > 1; }}};
  for (const auto& g : gpus) scopes.push_back({g, [g](const ValidationRow& r) { return r.gpu == g; }});
  std::vector<ErrorSummary> out;
  for (const auto& m : metrics)
    for (const auto& [scope, in] : scopes) {
      std::vector<double> e;
      for (const auto& r : rows)
        if (r.metric == m && r.role == RowRole::Check && in(r)) e.push_back(std::abs(r.error()));
      if (e.empty()) continue;
      std::sort(e.begin(), e.end());
      const std::size_t n = e.size();
      ErrorSummary s{m, scope, static_cast<int>(n)};
      s.median = n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
      s.p90 = e[static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
      s.max = e.back();
      out.push_back(s);
    }
  return out;
}

// Workload rows: what a trace's published statistics say, against what shardsim reads from it.
// Mooncake's FAST'25 paper gives each of its traces' prefix-cache ratio (Table 2) — the share of
// prompt tokens a cache could serve — and ships the synthetic trace; shardsim's ceiling
// (prefix_reuse: arrival order, leading runs of block ids, each block computed once, never
// evicted) is the same quantity, so the row checks the prefix semantics the serving loop's cache uses.
void workload_rows(std::vector<ValidationRow>& rows) {
  const PrefixReuse u = prefix_reuse(load_request_trace("mooncake-synthetic"));
  rows.push_back({"Mooncake synthetic trace (3,993 requests), prefix-cache ratio", "workloads", "%", 66.0, 100 * u.ceiling(), 0.05,
                  RowRole::Check, "",
                  "Qin et al., \"Mooncake: Trading More Storage for Less Computation\", FAST'25, Table 2 (cache ratio); trace: "
                  "kvcache-ai/Mooncake FAST25-release/traces/synthetic_trace.jsonl (Apache-2.0)",
                  "the embedded trace (mooncake-synthetic), requests in arrival order, each 512-token block of hash_ids computed "
                  "once and never evicted, a hit the leading run of a prompt's ids (prefix_reuse)",
                  ""});
}

const char* to_string(RowRole r) { return r == RowRole::Calibration ? "calibration" : "check"; }

std::vector<ValidationRow> run_validation(const ExecutorFactory& make_executor, const ValidationOptions& options) {
  std::vector<ValidationRow> rows;
  kernel_rows(rows);
  measured_kernel_rows(rows);
  collective_rows(make_executor, rows);
  custom_allreduce_rows(make_executor, rows);
  expert_all_to_all_rows(make_executor, rows);
  normal_kernel_rows(make_executor, rows);
  workload_rows(rows);
  if (options.end_to_end) {
    end_to_end_rows(make_executor, options, rows);
    disaggregated_rows(make_executor, options, rows);
    closed_loop_rows(make_executor, options, rows);
    speculative_rows(make_executor, options, rows);
    engine_step_rows(make_executor, options, rows);
    energy_rows(make_executor, options, rows);
  }
  return rows;
}

json validation_to_json(const std::vector<ValidationRow>& rows, const std::string& executor) {
  json out = json::array();
  for (const auto& r : rows)
    out.push_back({{"name", r.name},
                   {"group", r.group},
                   {"role", to_string(r.role)},
                   {"unit", r.unit},
                   {"published", r.published},
                   {"simulated", r.simulated},
                   {"error", r.error()},
                   {"tolerance", r.tolerance},
                   {"within", r.within()},
                   {"sets", r.sets},
                   {"source", r.source},
                   {"setup", r.setup},
                   {"known_miss", r.known_miss},
                   {"executor", executor}});
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!rows[i].metric.empty()) {
      out[i]["metric"] = rows[i].metric;
      out[i]["gpu"] = rows[i].gpu;
      out[i]["nodes"] = rows[i].nodes;
    }
  return out;
}

}  // namespace shardsim
