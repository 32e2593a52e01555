// sim/serving/validation_speculative.cpp — check rows for a published speculative-decoding sweep.
//
// NVIDIA TensorRT-LLM tech blog 1, "Pushing Latency Boundaries: Optimizing DeepSeek-R1 Performance
// on NVIDIA B200 GPUs" (NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/blog1_…, 2025-05-16): its
// MTP table — DeepSeek-R1 with NVFP4 FFNs and experts on 8 × B200, one request at a time, 1k-token
// prompts and 2k-token answers — gives output tokens/s per user (answer tokens over the request's
// whole latency) and the measured acceptance length with 0 to 5 MTP draft tokens.
// Set up as run: DeepSeek-V3's architecture (R1's), attention TP8, experts TP2 × EP4 (that
// table's stack: `--tp 8 --ep 4`, the CUTLASS MoE backend), NVFP4 FFN and expert weights with
// NVFP4 activations (W4A4), attention projections and KV cache in BF16, the TensorRT-LLM preset,
// one client, ten requests of 1,041 prompt and 2,046 answer tokens (the tokens per request the
// blog's trtllm-bench printout implies). The acceptance is the published one: per-position rates
// a₁ = 0.92, a₂ = 0.717, a₃ = 0.364 reproduce the table's acceptance lengths 1.92, 2.58 and 2.82
// for one, two and three drafts (nextn 4 and 5 add little and are left out). The MTP layers run in
// BF16, as the checkpoint keeps them (draft_weights=bf16).
// Rows: the tokens/s per user at each setting (against its absolute figure) and the gain of each
// setting over no MTP (the speculative model's own check, free of the base step's error).
#include <memory>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/serving/validation_groups.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

namespace {

struct MtpPoint {
  int drafts;
  const char* accept;   // per-position acceptance rates reproducing the published acceptance length
  double tok_s_user;    // published
  double acceptance;    // published acceptance length (tokens per step)
  const char* miss;     // cause of an absolute row's miss ("" = none)
};

const MtpPoint kSweep[] = {
    {0, "", 111, 1.00, ""},
    {1, "0.92", 198, 1.92, ""},
    {2, "0.92:0.717", 250, 2.58, ""},
    {3, "0.92:0.717:0.364", 253, 2.82, ""},
};

}  // namespace

void speculative_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows) {
  const std::string src =
      "NVIDIA TensorRT-LLM tech blog 1, Pushing Latency Boundaries: Optimizing DeepSeek-R1 Performance on NVIDIA B200 "
      "GPUs (NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/, 2025-05-16), MTP table: 8×B200, batch 1, 1k/2k tokens";
  const ModelSpec model = load_model("deepseek-v3");
  const std::string cluster_spec = "dgx-b200:1";
  const Cluster cluster = load_cluster(cluster_spec);
  const int n = opt.request_scale < 1 ? 2 : 10;
  const std::string spec = "synthetic:n=" + std::to_string(n) + ",prompt=fixed:1041,output=fixed:2046,seed=1";
  const RequestTrace trace = load_request_trace(spec);
  // The default synthetic routing (balanced-trained experts, mild skew), as the other MoE rows:
  // one token's eight experts land unevenly on the four EP ranks.
  const std::unique_ptr<RoutingSource> routing = make_routing("synthetic:seed=7", model.routing_shape());
  double base = 0;
  for (const MtpPoint& p : kSweep) {
    std::string text = "tp=8,ep=4,etp=2,weights=fp4,act=fp4,attn_weights=bf16,kv=bf16,engine=trtllm";
    if (p.drafts > 0) text += ",spec_tokens=" + std::to_string(p.drafts) + ",spec_accept=" + p.accept + ",draft_weights=bf16";
    const Plan plan = plan_from_string(text, cluster.num_gpus(), plan_defaults(model));
    ServingOptions so;
    so.concurrency = 1;
    if (opt.exact) so.set_exact();
    const ServingResult r = serve_row(make, opt, plan, model, cluster, cluster_spec, trace, routing.get(), so);
    double per_user = 0;  // answer tokens over the request's latency, averaged as trtllm-bench reports it
    int done = 0;
    for (const auto& q : r.requests)
      if (q.completed && q.finish > q.arrival) per_user += q.output_tokens / (q.finish - q.arrival), ++done;
    per_user = done ? per_user / done : 0;
    if (p.drafts == 0) base = per_user;
    const std::string name = "DeepSeek-R1 NVFP4, 8×B200, batch 1, " +
                             (p.drafts ? "MTP " + std::to_string(p.drafts) + " (acceptance length " +
                                             std::to_string(p.acceptance).substr(0, 4) + ")"
                                       : std::string("no MTP"));
    const std::string setup = "deepseek-v3 on " + cluster_spec + ", plan " + plan_to_string(plan) + ", one client, trace " + spec;
    rows.push_back({name + ", output tok/s per user", "end-to-end throughput", "tok/s", p.tok_s_user, per_user, 0.10,
                    RowRole::Check, "", src, setup, p.miss});
    tag(rows, "throughput", cluster);
    if (p.drafts > 0 && base > 0)
      rows.push_back({name + ", gain over no MTP", "speculative decoding", "×", p.tok_s_user / kSweep[0].tok_s_user,
                      per_user / base, 0.25, RowRole::Check, "", src, setup, ""});
  }
}

}  // namespace shardsim
