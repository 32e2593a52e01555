// sim/serving/kv_transfer.cpp — the KV-transfer program of a disaggregated plan (see kv_transfer.hpp).
#include "sim/serving/kv_transfer.hpp"

#include <algorithm>
#include <map>

#include "sim/plan/plan_layout.hpp"
#include "sim/step/analytic_executor.hpp"

namespace shardsim {

KvTransferProgram kv_transfer_program(const Plan& disagg, const MemoryReport& decode_memory,
                                      const std::vector<KvHandoff>& handoffs) {
  KvTransferProgram out;
  const Plan prefill = disagg.prefill();
  const Plan& decode = disagg.decode();
  const PlanLayout pl(prefill), dl(decode);
  std::vector<std::size_t> order(handoffs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return handoffs[a].ready < handoffs[b].ready; });
  std::map<int, int> rank_of_gpu;
  auto rank = [&](int gpu) {
    auto [it, fresh] = rank_of_gpu.emplace(gpu, static_cast<int>(out.program.rank_gpu.size()));
    if (fresh) out.program.rank_gpu.push_back(gpu);
    return it->second;
  };
  StepProgram& p = out.program;
  for (std::size_t i : order) {
    const KvHandoff& h = handoffs[i];
    const std::vector<int> src = pl.replica(h.prefill_replica);
    int k = 0;
    for (int s = 0; s < decode.deg.pp; ++s) {
      const double per_token = decode_memory.stages.at(static_cast<std::size_t>(s)).kv_per_token;
      for (int t = 0; t < decode.deg.tp; ++t, ++k) {
        StepOp op;
        op.type = OpType::Send;
        op.cls = OpClass::PipelineP2p;
        op.rank = rank(src[static_cast<std::size_t>(k) % src.size()]);
        op.peer = rank(dl.gpu({t, h.decode_group, s, h.decode_replica}));
        op.bytes = per_token * h.prompt_tokens;
        op.not_before = h.ready;
        if (op.rank == op.peer || !(op.bytes > 0)) continue;
        p.add(op, {});
        out.handoff_of_op.push_back(static_cast<int>(i));
        out.bytes += op.bytes;
      }
    }
  }
  return out;
}

std::vector<double> handoff_arrivals(const KvTransferProgram& t, const std::vector<double>& op_end, std::size_t handoffs) {
  std::vector<double> out(handoffs, 0);
  for (std::size_t i = 0; i < t.handoff_of_op.size() && i < op_end.size(); ++i) {
    double& a = out[static_cast<std::size_t>(t.handoff_of_op[i])];
    a = std::max(a, op_end[i]);
  }
  return out;
}

TransferTimer analytic_transfer_timer(const Cluster& cluster) {
  return [&cluster](const StepProgram& p) {
    AnalyticExecutor ex(cluster);
    std::vector<TimelineEvent> events;  // a send's two events (sender, receiver) in op order
    ex.run(p, &events);
    std::vector<double> end(p.ops.size(), 0);
    for (std::size_t i = 0; i < end.size() && 2 * i < events.size(); ++i) end[i] = events[2 * i].start + events[2 * i].duration;
    return end;
  };
}

}  // namespace shardsim
