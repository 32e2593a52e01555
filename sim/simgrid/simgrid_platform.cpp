// sim/simgrid/simgrid_platform.cpp — the process's SimGrid Engine and the platforms built from clusters.
//
// Owns: Engine creation and configuration (a synthetic argv, since SimGrid reads its network model
// before the first zone exists), the completion signal that forwards to the running executor, and
// the lazy routing zone. A platform's zone has no parent: SimGrid refuses children of a sealed
// zone, and the root is sealed by the first run, so zones hang beside the (empty) root and copy its
// models — that is what lets a worker add a cluster after it has already simulated another.
// Thread-safety: none (see the header).
#include "sim/simgrid/simgrid_platform.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <xbt/log.h>

namespace shardsim {

namespace sg4 = simgrid::s4u;
namespace kr = simgrid::kernel::routing;

// A routing zone whose routes are Cluster routes, computed when SimGrid first asks for them.
// Its only components are the GPU hosts, created in GPU order, so a host's netpoint id is its GPU id.
struct SimgridPlatform::Zone final : kr::NetZoneImpl {
  Zone(const std::string& name, SimgridPlatform* owner) : NetZoneImpl(name), owner_(owner) {}
  void get_local_route(const kr::NetPoint* src, const kr::NetPoint* dst, kr::Route* into, double* /*latency*/) override {
    if (src == dst) return;
    const SimgridRoute& r = owner_->route(static_cast<int>(src->id()), static_cast<int>(dst->id()));
    into->link_list_.insert(into->link_list_.end(), r.sg_links.begin(), r.sg_links.end());
    // Latency is 0 on every link: the executor pays route latencies as timers.
  }

 private:
  SimgridPlatform* owner_;
};

namespace {

std::uint64_t fnv(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}
template <class T>
std::uint64_t fnv(std::uint64_t h, const T& v) {
  return fnv(h, &v, sizeof v);
}

double efficiency_of(const Cluster& c, LinkClass cls) {
  return cls == LinkClass::NvLink ? c.collective_efficiency().nvlink : c.collective_efficiency().network;
}

}  // namespace

SimgridPlatform::SimgridPlatform(const Cluster& cluster, int index, std::uint64_t fingerprint)
    : cluster_(cluster), index_(index), fingerprint_(fingerprint) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string prefix = "p";  // built piecewise: GCC 12 warns falsely (-Wrestrict) on a + chain here
  prefix += std::to_string(index);
  prefix += ':';
  zone_ = new Zone(prefix + cluster_.name(), this);  // SimGrid owns zones; this one is never destroyed
  // A parentless zone: take the models from the root (what set_parent would have copied).
  const kr::NetZoneImpl* root = sg4::Engine::get_instance()->get_netzone_root()->get_impl();
  zone_->set_network_model(root->get_network_model());
  zone_->set_cpu_pm_model(root->get_cpu_pm_model());
  zone_->set_cpu_vm_model(root->get_cpu_vm_model());
  zone_->set_disk_model(root->get_disk_model());
  zone_->set_host_model(root->get_host_model());
  sg4::NetZone* zone = zone_->get_iface();

  const int n = cluster_.num_gpus();
  hosts_.reserve(static_cast<std::size_t>(n));
  for (int g = 0; g < n; ++g) {
    // Sealed one by one: zone->seal() finds its hosts through the Engine's host list, which does
    // not see hosts of a parentless zone, and an unsealed host has no CPU constraint.
    hosts_.push_back(zone->create_host(prefix + "gpu" + std::to_string(g), kSimgridHostSpeed)->seal());
    if (hosts_.back()->get_netpoint()->id() != static_cast<unsigned long>(g))
      throw std::logic_error("SimgridPlatform: host ids do not follow GPU ids");
  }
  const int links = cluster_.num_links();
  capacity_.resize(static_cast<std::size_t>(links));
  sg_link_.resize(2 * static_cast<std::size_t>(links));
  for (int id = 0; id < links; ++id) {
    const LinkInfo& l = cluster_.link(id);
    const double cap = l.bandwidth * efficiency_of(cluster_, l.cls);
    capacity_[static_cast<std::size_t>(id)] = cap;
    sg4::SplitDuplexLink* sd = zone->create_split_duplex_link(prefix + "l" + std::to_string(id), cap);
    sd->set_latency(0);
    sg_link_[2 * static_cast<std::size_t>(id)] = sd->get_link_up()->get_impl();
    sg_link_[2 * static_cast<std::size_t>(id) + 1] = sd->get_link_down()->get_impl();
  }
  zone->seal();
  build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SimgridPlatform::~SimgridPlatform() = default;

const SimgridRoute& SimgridPlatform::route(int src_gpu, int dst_gpu) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src_gpu)) << 32) |
                            static_cast<std::uint32_t>(dst_gpu);
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  const Route r = cluster_.route(src_gpu, dst_gpu);
  SimgridRoute out;
  out.latency = r.latency;
  out.nvlink_only = r.nvlink_only;
  out.bandwidth = r.links.empty() ? 0 : 1e300;
  out.dlinks.reserve(r.links.size());
  out.sg_links.reserve(r.links.size());
  int cur = static_cast<int>(cluster_.gpu_vertex(src_gpu));
  for (int id : r.links) {
    const auto [a, b] = cluster_.link_ends(id);
    const int dir = a == cur ? 0 : 1;
    cur = dir == 0 ? b : a;
    const int d = 2 * id + dir;
    out.dlinks.push_back(d);
    out.sg_links.push_back(sg_link_[static_cast<std::size_t>(d)]);
    out.bandwidth = std::min(out.bandwidth, capacity_[static_cast<std::size_t>(id)]);
  }
  return routes_.emplace(key, std::move(out)).first->second;
}

SimgridWorld& SimgridWorld::instance() {
  static SimgridWorld* world = new SimgridWorld();  // never destroyed, like the Engine it owns
  return *world;
}

SimgridWorld::SimgridWorld() {
  if (sg4::Engine::is_initialized())
    throw std::logic_error("SimgridWorld: a SimGrid Engine already exists in this process (one per process)");
  // "off" is not a valid threshold in 3.32 and aborts; "critical" silences everything we trigger.
  xbt_log_control_set("root.thres:critical");
  // The network model is read when the first zone is created; config keys are accepted from argv.
  static char a0[] = "shardsim";
  static char a1[] = "--cfg=network/model:CM02";
  static char a2[] = "--cfg=network/crosstraffic:0";
  static char a3[] = "--cfg=network/TCP-gamma:0";
  static char* argv[] = {a0, a1, a2, a3, nullptr};
  int argc = 4;
  engine_ = new sg4::Engine(&argc, argv);
  sg4::create_empty_zone("shardsim");  // the root: holds the models every platform zone copies
  // Move the clock to kClockOrigin before anything is simulated (see the header: from there on,
  // until 2 · kClockOrigin, a step's results do not depend on when it runs).
  simgrid::kernel::timer::Timer::set(kClockOrigin, [] {});
  engine_->run();
  sg4::Activity::on_completion_cb([this](const sg4::Activity& a) {
    if (listener_ == nullptr || a.get_state() != sg4::Activity::State::FINISHED) return;
    if (void* data = a.get_data<void>()) listener_->activity_done(data);
  });
}

std::uint64_t SimgridWorld::fingerprint(const Cluster& c) {
  std::uint64_t h = 1469598103934665603ULL;
  h = fnv(h, c.num_gpus());
  h = fnv(h, c.gpus_per_node());
  h = fnv(h, c.num_vertices());
  h = fnv(h, c.num_links());
  h = fnv(h, c.collective_efficiency().nvlink);
  h = fnv(h, c.collective_efficiency().network);
  h = fnv(h, c.gpu().nvlink_bw);
  for (int n = 0; c.mixed() && n < c.num_nodes(); ++n) h = fnv(h, c.node_gpu(n).nvlink_bw);
  h = fnv(h, c.fabric().kind.data(), c.fabric().kind.size());
  for (int id = 0; id < c.num_links(); ++id) {
    const LinkInfo& l = c.link(id);
    const auto ends = c.link_ends(id);
    h = fnv(h, ends.first);
    h = fnv(h, ends.second);
    h = fnv(h, static_cast<int>(l.cls));
    h = fnv(h, l.bandwidth);
    h = fnv(h, l.latency);
  }
  for (int v = 0; v < c.num_vertices(); ++v) {
    const VertexInfo& info = c.graph()[static_cast<Vertex>(v)];
    h = fnv(h, static_cast<int>(info.kind));
    h = fnv(h, info.gpu);
  }
  return h;
}

SimgridPlatform& SimgridWorld::platform(const Cluster& cluster) {
  const std::uint64_t fp = fingerprint(cluster);
  for (auto& p : platforms_)
    if (p->fingerprint() == fp) return *p;
  if (running()) throw std::logic_error("SimgridWorld::platform: cannot add a platform during a run");
  platforms_.push_back(std::unique_ptr<SimgridPlatform>(
      new SimgridPlatform(cluster, static_cast<int>(platforms_.size()), fp)));
  return *platforms_.back();
}

double SimgridWorld::now() { return sg4::Engine::get_clock(); }

void SimgridWorld::run(SimgridCompletionListener& listener) {
  if (running()) throw std::logic_error("SimgridWorld::run: already running (one run at a time per process)");
  listener_ = &listener;
  try {
    engine_->run();
  } catch (...) {
    listener_ = nullptr;
    throw;
  }
  listener_ = nullptr;
}

}  // namespace shardsim
