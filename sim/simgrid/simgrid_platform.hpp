// sim/simgrid/simgrid_platform.hpp — the SimGrid world of a process: one Engine, and one platform per Cluster.
//
// Owns: SimgridWorld (the process's only SimGrid Engine, configured for exact alpha-beta sharing)
// and SimgridPlatform (the hosts, links and routes that stand for one Cluster inside that Engine).
// What becomes what (docs/simgrid.md):
//   GPU            → a host of speed kSimgridHostSpeed (compute operations become flop amounts that
//                    take exactly their roofline time at that speed)
//   cluster link   → a SimGrid split-duplex link (SHARED in each direction) of bandwidth × the
//                    cluster's collective efficiency (NVLink efficiency for NvLink links, network
//                    efficiency for all others) and latency 0: the executor pays a route's latency as
//                    a timer before the flow starts, so bandwidth sharing never depends on latency
//                    (CM02 otherwise shares a bottleneck in inverse proportion to path latency)
//   route          → exactly Cluster::route(src, dst), built lazily the first time SimGrid asks for
//                    it (a custom routing zone; a full route table would hold n² entries)
// Network model CM02 with network/crosstraffic:0 and network/TCP-gamma:0: a lone flow of S bytes on
// a route of bottleneck B takes S/B, a ring of flows reproduces 2(p−1)(α + S/(pB)) to 1e-9.
// Invariants: one Engine per process, created by the first SimgridWorld::instance() and never
// destroyed; platforms are added at any time (also after runs) and live as long as the process;
// two Cluster objects with identical content share one platform.
// Reproducibility: the Engine's clock never goes back, and SimGrid computes event dates in
// absolute time, so the rounding of a step's times would depend on when it runs. The world
// therefore starts the clock at kClockOrigin = 2^16 s: while the clock stays in [2^16, 2^17) s
// (18 hours of simulated time per process) every date is a multiple of the same grid, 2^-36 s
// ≈ 15 ps, differences of dates are exact, and the same program gives bit-identical results
// whatever ran before it — in this process or in another. Past 2^17 s results stay correct but may
// differ from a fresh process's in the last bits (deterministic() says which).
// Units: bytes, bytes/s per direction, seconds, flop/s.
// Thread-safety: none. Everything here belongs to the one thread that drives SimGrid (the SimGrid
// scorer lives in worker processes, docs/architecture.md, Conventions); instance() must not race with itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "topologies/cluster.hpp"

namespace simgrid::s4u {
class Engine;
class Host;
}  // namespace simgrid::s4u
namespace simgrid::kernel::resource {
class StandardLinkImpl;
}  // namespace simgrid::kernel::resource

namespace shardsim {

inline constexpr double kSimgridHostSpeed = 1e12;  // flop/s of every GPU host

// A route as the SimGrid executor uses it; fixed once built.
struct SimgridRoute {
  std::vector<int> dlinks;   // directed links in path order: 2 · link id + (0 = from link_ends().first, 1 = reverse)
  double bandwidth = 0;      // bottleneck of the SimGrid capacities on the route (bandwidth × efficiency), bytes/s
  double latency = 0;        // sum of the cluster link latencies, seconds (paid by the executor as a delay)
  bool nvlink_only = false;  // every link is NvLink class
  std::vector<simgrid::kernel::resource::StandardLinkImpl*> sg_links;  // the SimGrid links, in path order
};

class SimgridPlatform {
 public:
  SimgridPlatform(const SimgridPlatform&) = delete;
  SimgridPlatform& operator=(const SimgridPlatform&) = delete;
  ~SimgridPlatform();

  // Fixed after construction.
  const Cluster& cluster() const { return cluster_; }
  int index() const { return index_; }                   // position in the world, names are prefixed "p<index>:"
  std::uint64_t fingerprint() const { return fingerprint_; }
  double build_seconds() const { return build_seconds_; }  // wall time to create hosts and links
  simgrid::s4u::Host* host(int gpu) const { return hosts_.at(static_cast<std::size_t>(gpu)); }
  // Capacity given to SimGrid for cluster link `link_id`, bytes/s per direction.
  double capacity(int link_id) const { return capacity_.at(static_cast<std::size_t>(link_id)); }

  // Route from one GPU to another (src != dst); built from Cluster::route on first use, then kept.
  // REQUIRES: valid, distinct GPU ids.
  const SimgridRoute& route(int src_gpu, int dst_gpu);
  std::size_t routes_cached() const { return routes_.size(); }

 private:
  friend class SimgridWorld;
  struct Zone;
  SimgridPlatform(const Cluster& cluster, int index, std::uint64_t fingerprint);

  Cluster cluster_;                                    // a copy: platforms outlive their callers' clusters
  int index_ = 0;
  std::uint64_t fingerprint_ = 0;
  double build_seconds_ = 0;
  Zone* zone_ = nullptr;                               // owned by SimGrid (lives as long as the Engine)
  std::vector<simgrid::s4u::Host*> hosts_;             // per GPU
  std::vector<double> capacity_;                       // per cluster link
  std::vector<simgrid::kernel::resource::StandardLinkImpl*> sg_link_;  // per directed link (2 · id + dir)
  std::unordered_map<std::uint64_t, SimgridRoute> routes_;             // key: src · 2^32 + dst
};

// Receives the completions of the activities started during SimgridWorld::run (those whose
// SimGrid data pointer was set).
class SimgridCompletionListener {
 public:
  virtual void activity_done(void* data) = 0;

 protected:
  ~SimgridCompletionListener() = default;
};

class SimgridWorld {
 public:
  // The process's world; the first call creates and configures the Engine (silenced logs, CM02,
  // exact alpha-beta). Throws std::logic_error when some other code already created an Engine.
  static SimgridWorld& instance();

  SimgridWorld(const SimgridWorld&) = delete;
  SimgridWorld& operator=(const SimgridWorld&) = delete;

  // The platform of `cluster`, built on first request (clusters with equal content share one).
  SimgridPlatform& platform(const Cluster& cluster);
  std::size_t num_platforms() const { return platforms_.size(); }

  simgrid::s4u::Engine& engine() { return *engine_; }
  // The Engine's clock, seconds (it starts at kClockOrigin and keeps running across steps).
  static double now();
  static constexpr double kClockOrigin = 65536.0;  // 2^16 s
  // True while runs are bit-reproducible (the clock is below 2 · kClockOrigin).
  static bool deterministic() { return now() < 2 * kClockOrigin; }
  // Runs the simulation until no activity and no timer is left, sending each completed activity's
  // data to `listener`. REQUIRES: not called from inside a run.
  void run(SimgridCompletionListener& listener);
  bool running() const { return listener_ != nullptr; }

  // Content hash used to share platforms between equal clusters.
  static std::uint64_t fingerprint(const Cluster& cluster);

 private:
  SimgridWorld();
  simgrid::s4u::Engine* engine_ = nullptr;   // never destroyed (one Engine per process, ever)
  std::vector<std::unique_ptr<SimgridPlatform>> platforms_;
  SimgridCompletionListener* listener_ = nullptr;
};

}  // namespace shardsim
