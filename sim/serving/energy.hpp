// sim/serving/energy.hpp — what a run's GPUs and network draw: joules, watts per GPU, joules per
// generated token.
//
// Owns: EnergyPool, NetworkPower, RunEnergy, run_energy() and network_ports(). The GPU model
// (GpuPower in topologies/gpu_spec.hpp, per GPU type) charges, over a run of `seconds`:
//   idle_w   × every GPU of the pool × seconds                                   (static)
//   active_w × the GPU-seconds a kernel ran: the compute stream's busy time (StepTiming::busy over
//              the compute classes); communication while it waits is charged at idle (docs/energy.md)
//   tensor_w × the tensor work: flops ÷ the peak flop/s of their math type (StepTiming::tensor_work)
//   hbm_w    × the HBM work: bytes ÷ the peak bandwidth (StepTiming::hbm_work)
// — the split of static and dynamic power ML.ENERGY's measurements use (docs/energy.md, where the
// constants come from and what they were checked against). The work terms do not depend on how
// fast a kernel ran, only on what it did; the active term is what a slow kernel pays more.
// The network: every NIC port and switch port of the cluster draws a constant (NetworkPower) for
// the whole run, traffic or not (optics and SerDes do). Not counted: NVSwitch chips, CPUs, fans,
// power-supply and cooling losses — a facility figure multiplies by its own PUE and host share.
// The board limit (tdp_w) holds the mean draw while working — steps with their host gaps — not each
// kernel's draw (hold_at_limit); time with no step under way is idle.
// A run's breakdown sums per-GPU figures over its replicas' steps (ServingBreakdown), so a pool's
// GPU-seconds are those sums × gpus ÷ dp (as GpuTime does, sim/whatif/comparison.hpp).
// Units: seconds, joules, watts. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

class Cluster;

// One pool of a run (a colocated plan has one; a disaggregated plan prefill and decode): what its
// steps did, as per-GPU sums over its replicas' steps — seconds its compute stream ran, tensor and
// HBM work at peak — the GPUs those sums cover
// (one simulated replica's when it stands for its alike ones), its replicas, and its GPU type.
struct EnergyPool {
  double active = 0, tensor_work = 0, hbm_work = 0;
  int gpus = 0, dp = 1;
  const GpuSpec* gpu = nullptr;
  double engaged = 0;  // per-GPU seconds its replicas had a step under way (ServingBreakdown::engaged)
};
EnergyPool energy_pool(const ServingBreakdown& b, int gpus, int dp, const GpuSpec& gpu);

// One pool's GPU energy over `seconds` under `power`, before any power limit: its GPU-seconds of
// active time (at most every GPU the whole time), tensor and HBM work (the per-GPU sums × gpus ÷
// dp), and the terms above. The one definition run_energy and the power fit's windows both use;
// each applies the board limit itself (run_energy: hold_at_limit).
struct PoolEnergy {
  double active_s = 0, tensor_s = 0, hbm_s = 0;  // GPU-seconds
  double engaged_s = 0;                          // GPU-seconds with a step under way (≥ active_s)
  double idle_j = 0, active_j = 0, tensor_j = 0, hbm_j = 0;
  bool capped = false;
  double dynamic_j() const { return active_j + tensor_j + hbm_j; }
  double gpu_j() const { return idle_j + dynamic_j(); }
};
PoolEnergy pool_energy(const EnergyPool& p, const GpuPower& power, double seconds);
// `e` with its dynamic part scaled down so that the mean draw while engaged — from a step's start to
// its end, the host's gaps between kernels and steps included — stays within tdp_w (the GPU
// throttles there), `capped` set when it was. The board's limiter holds a running mean, not each
// kernel's draw: a serving engine's millisecond host gaps do not let its kernels draw above the
// limit, nor does a host gap bring the limit's mean down to idle (ML.ENERGY measured vLLM's H100
// board at 92-98.6% of its limit from batch 96 up while the simulated windows leave ~10% of each
// step to the host; docs/energy.md). Time with no step under way is idle and outside this mean.
PoolEnergy hold_at_limit(PoolEnergy e, const GpuPower& power);
// The same from the steps of `r` (recorded: ServingOptions::record_work) that ended in (from, to].
EnergyPool energy_pool(const ServingResult& r, double from, double to, int gpus, int dp, const GpuSpec& gpu);

// Constant draw per network port. Defaults: the optics of a 400 Gb/s InfiniBand port, NVIDIA's
// product specifications — 9 W for the NIC's single-port OSFP transceiver (MMS4X00-NS400), 17 W
// for a switch's twin-port OSFP cage (QM97xx manual, Class 8), 8.5 W per port. The NIC and switch
// ASICs' own share was not found published and is not counted (docs/energy.md).
struct NetworkPower {
  double nic_port_w = 9.0;
  double switch_port_w = 8.5;
};

// A cluster's network ports: NIC ports (one per GPU↔network link) and switch (or router) ports:
// one per NIC link, two per switch-to-switch link, each counted per 400 Gb/s (50 GB/s) of the
// link's bandwidth (an aggregated trunk counts as the ports it stands for).
struct NetworkPorts {
  double nic = 0, switch_ports = 0;  // ports charged (a share of a cluster's may be fractional)
  NetworkPorts share(double f) const { return {nic * f, switch_ports * f}; }
};
NetworkPorts network_ports(const Cluster& c);

struct RunEnergy {
  bool modelled = false;          // every pool's GPU type has a power model (GpuPower)
  double seconds = 0;             // the run's duration
  int gpus = 0;                   // GPUs charged
  double idle_j = 0, active_j = 0, tensor_j = 0, hbm_j = 0;  // the GPU terms above
  double network_j = 0;
  double working_w = 0;           // mean board draw while a step is under way (the heaviest pool; hold_at_limit)
  double tdp_w = 0;               // that pool's board limit
  bool capped = false;            // some pool's busy draw was held at its limit (the model asked for more)
  double gpu_j() const { return idle_j + active_j + tensor_j + hbm_j; }
  double total_j() const { return gpu_j() + network_j; }
  double watts_per_gpu() const { return gpus > 0 && seconds > 0 ? gpu_j() / (gpus * seconds) : 0; }
  // Joules per generated token (GPU + network), and its inverse; 0 without tokens or a model.
  double joules_per_token(double output_tokens) const { return modelled && output_tokens > 0 ? total_j() / output_tokens : 0; }
  double tokens_per_joule(double output_tokens) const { return modelled && total_j() > 0 ? output_tokens / total_j() : 0; }
  // "431 W per GPU (busy 455 W of 700 W[, held at the board limit]), 0.212 J per generated token: GPU 0.207 (idle 0.034,
  // active 0.071, tensor 0.021, HBM 0.081), network 0.005"; "not modelled (…)" without a model.
  std::string describe(double output_tokens) const;
};

struct Plan;

// A run of `plan`'s pools: a colocated plan's one (r.breakdown), a disaggregated plan's prefill and
// decode pools (r.disagg), each on its own GPU type. `one_replica`: the run simulated replica 0
// alone (ServingOptions::replica_share), so the pool is that replica's GPUs.
std::vector<EnergyPool> energy_pools(const ServingResult& r, const Plan& plan, const Cluster& c, bool one_replica = false);

// {"watts_per_gpu", "working_watts", "tdp_watts", "joules": {"idle", "active", "tensor", "hbm",
// "network", "total"}, "joules_per_token", "tokens_per_joule", "counted": "…"}.
json energy_json(const RunEnergy& e, double output_tokens);

// `seconds`: the run's duration (every GPU idles through what no step fills). `ports`: the
// network charged (zero ports: none).
RunEnergy run_energy(const std::vector<EnergyPool>& pools, double seconds, const NetworkPorts& ports,
                     const NetworkPower& net = {});

}  // namespace shardsim
