// sim/serving/energy.cpp — the run's energy from its breakdown (energy.hpp).
#include "sim/serving/energy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/plan/plan.hpp"
#include "sim/step/schedule_summary.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace {

constexpr double kPortBytesPerSecond = 50e9;  // one 400 Gb/s port, per direction

int ports_of(double bandwidth) { return std::max(1, static_cast<int>(std::lround(bandwidth / kPortBytesPerSecond))); }

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

EnergyPool energy_pool(const ServingBreakdown& b, int gpus, int dp, const GpuSpec& gpu) {
  EnergyPool p;
  p.active = compute_busy(b.busy);
  p.engaged = b.engaged;
  p.tensor_work = b.tensor_work;
  p.hbm_work = b.hbm_work;
  p.gpus = gpus;
  p.dp = dp;
  p.gpu = &gpu;
  return p;
}

EnergyPool energy_pool(const ServingResult& r, double from, double to, int gpus, int dp, const GpuSpec& gpu) {
  EnergyPool p;
  for (const StepEnergyWork& w : r.step_work) {
    if (!(w.end > from && w.end <= to)) continue;
    p.active += w.active;
    p.engaged += w.engaged;
    p.tensor_work += w.tensor_work;
    p.hbm_work += w.hbm_work;
  }
  p.gpus = gpus;
  p.dp = dp;
  p.gpu = &gpu;
  return p;
}

std::vector<EnergyPool> energy_pools(const ServingResult& r, const Plan& plan, const Cluster& c, bool one_replica) {
  if (r.disagg.on) {
    const Plan prefill = plan.prefill();
    const Plan& decode = plan.decode();
    return {energy_pool(r.disagg.prefill.breakdown, prefill.deg.gpus(), prefill.deg.dp, c.pool_gpu(prefill.first_gpu)),
            energy_pool(r.disagg.decode.breakdown, decode.deg.gpus(), decode.deg.dp, c.pool_gpu(decode.first_gpu))};
  }
  const int dp = std::max(1, plan.deg.dp);
  if (one_replica) return {energy_pool(r.breakdown, plan.deg.gpus() / dp, 1, c.pool_gpu(plan.first_gpu))};
  return {energy_pool(r.breakdown, plan.deg.gpus(), dp, c.pool_gpu(plan.first_gpu))};
}

NetworkPorts network_ports(const Cluster& c) {
  NetworkPorts p;
  for (int id = 0; id < c.num_links(); ++id) {
    const LinkInfo& l = c.link(id);
    switch (l.cls) {
      case LinkClass::NvLink: break;
      case LinkClass::NicLink:
        p.nic += ports_of(l.bandwidth);
        p.switch_ports += ports_of(l.bandwidth);
        break;
      default: p.switch_ports += 2 * ports_of(l.bandwidth); break;
    }
  }
  return p;
}

PoolEnergy pool_energy(const EnergyPool& p, const GpuPower& w, double seconds) {
  PoolEnergy e;
  seconds = std::max(0.0, seconds);
  const double per_replica = static_cast<double>(p.gpus) / std::max(1, p.dp);  // per-GPU sums → GPU-seconds
  e.active_s = std::min(p.active * per_replica, p.gpus * seconds);
  e.engaged_s = std::min(std::max(p.engaged * per_replica, e.active_s), p.gpus * seconds);
  e.tensor_s = p.tensor_work * per_replica;
  e.hbm_s = p.hbm_work * per_replica;
  e.idle_j = w.idle_w * p.gpus * seconds;
  e.active_j = w.active_w * e.active_s;
  e.tensor_j = w.tensor_w * e.tensor_s;
  e.hbm_j = w.hbm_w * e.hbm_s;
  return e;
}

PoolEnergy hold_at_limit(PoolEnergy e, const GpuPower& w) {
  const double dynamic = e.dynamic_j();
  if (w.tdp_w > 0 && e.engaged_s > 0 && dynamic > 0 && w.idle_w + dynamic / e.engaged_s > w.tdp_w) {
    const double f = std::max(0.0, (w.tdp_w - w.idle_w) * e.engaged_s / dynamic);
    e.active_j *= f, e.tensor_j *= f, e.hbm_j *= f;
    e.capped = true;
  }
  return e;
}

RunEnergy run_energy(const std::vector<EnergyPool>& pools, double seconds, const NetworkPorts& ports,
                     const NetworkPower& net) {
  RunEnergy e;
  e.seconds = std::max(0.0, seconds);
  e.modelled = !pools.empty();
  for (const EnergyPool& p : pools) {
    if (p.gpu == nullptr || !p.gpu->power.modelled()) {
      e.modelled = false;
      continue;
    }
    const GpuPower& w = p.gpu->power;
    const PoolEnergy pe = hold_at_limit(pool_energy(p, w, e.seconds), w);
    e.capped = e.capped || pe.capped;
    e.gpus += p.gpus;
    e.idle_j += pe.idle_j;
    e.active_j += pe.active_j;
    e.tensor_j += pe.tensor_j;
    e.hbm_j += pe.hbm_j;
    if (pe.engaged_s > 0) {
      const double busy = w.idle_w + pe.dynamic_j() / pe.engaged_s;
      if (busy >= e.working_w) {
        e.working_w = busy;
        e.tdp_w = w.tdp_w;
      }
    }
  }
  e.network_j = (ports.nic * net.nic_port_w + ports.switch_ports * net.switch_port_w) * e.seconds;
  return e;
}

json energy_json(const RunEnergy& e, double output_tokens) {
  json j = {{"watts_per_gpu", e.watts_per_gpu()}, {"working_watts", e.working_w}, {"tdp_watts", e.tdp_w}, {"seconds", e.seconds},
            {"joules", {{"idle", e.idle_j}, {"active", e.active_j}, {"tensor", e.tensor_j}, {"hbm", e.hbm_j},
                        {"network", e.network_j}, {"total", e.total_j()}}},
            {"joules_per_token", e.joules_per_token(output_tokens)}, {"tokens_per_joule", e.tokens_per_joule(output_tokens)},
            {"counted", "GPU boards and network port optics; not host CPUs, NVSwitch chips, fans or cooling"}};
  return j;
}

std::string RunEnergy::describe(double output_tokens) const {
  if (!modelled) return "not modelled (a GPU type without a power model: \"power\" in its spec)";
  std::string s = fmt("%.0f W per GPU", watts_per_gpu()) + fmt(" (%.0f W", working_w) + fmt(" of %.0f W while working", tdp_w) +
                  (capped ? ", held at the board limit)" : ")");
  if (!(output_tokens > 0)) return s;
  const double t = output_tokens;
  return s + fmt(", %.3g J per generated token", total_j() / t) + fmt(": GPU %.3g", gpu_j() / t) +
         fmt(" (idle %.3g", idle_j / t) + fmt(", active %.3g", active_j / t) + fmt(", tensor %.3g", tensor_j / t) +
         fmt(", HBM %.3g)", hbm_j / t) + fmt(", network %.3g", network_j / t);
}

}  // namespace shardsim
