// tests/fuzz/checks.cpp — the checks of checks.hpp.
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace fuzz {

using namespace shardsim;

// ---- plans ----

namespace {
struct PlanWorld {
  ModelSpec model;
  Cluster cluster;
  PlanDefaults defaults;
};
const PlanWorld& plan_world() {
  static const PlanWorld w = [] {
    const ModelSpec* m = find_model_preset("mixtral-8x7b");
    if (!m) finding("model preset mixtral-8x7b missing");
    Cluster c = cluster_from_shorthand("dgx-h100:2");  // 16 GPUs, 2 NVLink domains
    return PlanWorld{*m, c, plan_defaults(*m)};
  }();
  return w;
}
}  // namespace

int plan_gpus() { return plan_world().cluster.num_gpus(); }
const PlanDefaults& plan_defaults() { return plan_world().defaults; }

void check_loaded_plan(const Plan& p) {
  const int gpus = plan_gpus();
  json j;
  std::string s;
  must("plan_to_json", [&] { j = plan_to_json(p); });
  must("plan_to_string", [&] { s = plan_to_string(p); });
  auto same_pool = [](const Plan& a, const Plan& b) {
    return a.deg == b.deg && a.sharding == b.sharding && a.mapping == b.mapping && a.dtypes == b.dtypes &&
           a.allow_cross_node_tp == b.allow_cross_node_tp && a.first_gpu == b.first_gpu;
  };
  auto same_layout = [&](const Plan& q) {  // both pools of a disaggregated plan
    return same_pool(q, p) && q.disaggregated() == p.disaggregated() && (!p.disaggregated() || same_pool(q.decode(), p.decode()));
  };
  auto folded = [](const Plan& a) {
    return static_cast<long long>(a.deg.ep) * a.deg.etp == static_cast<long long>(a.deg.tp) * a.deg.attn_dp;
  };
  // The JSON form holds every setting: it loads back to the same plan. Engine numbers are printed
  // with 12 significant digits, so they are compared as written (the JSON is a fixed point).
  Plan from_json;
  must("plan_from_json(plan_to_json(p))", [&] { from_json = plan_from_json(j, "written.json", gpus, plan_defaults()); });
  from_json.name = p.name;
  FUZZ_CHECK(same_layout(from_json), "plan_to_json loads back to different degrees/sharding/mapping/dtypes: " + j.dump());
  FUZZ_CHECK(plan_to_json(from_json) == j, "plan_to_json(plan_from_json(j)) != j for j = " + j.dump());
  // The compact string leaves out what the defaults give; it loads, and when the plan obeys the
  // MoE fold (ep × etp = tp × attn_dp, without which no plan is feasible) to the same layout.
  Plan from_string;
  must("plan_from_string(plan_to_string(p))", [&] { from_string = plan_from_string(s, gpus, plan_defaults()); });
  if (folded(p) && (!p.disaggregated() || folded(p.decode())))
    FUZZ_CHECK(same_layout(from_string), "plan_to_string loads back to a different plan: \"" + s + "\"");
  must("check_plan", [&] {
    PlanCheck c = check_plan(p, plan_world().model, plan_world().cluster);
    (void)c.feasible();
  });
}

// ---- clusters ----

void check_loaded_cluster(const Cluster& c) {
  const int n = c.num_gpus();
  FUZZ_CHECK(n >= 1 && n <= kMaxClusterGpus, "GPU count " + std::to_string(n));
  FUZZ_CHECK(c.gpus_per_node() >= 1, "gpus_per_node " + std::to_string(c.gpus_per_node()));
  must("cluster queries", [&] {
    const int step = std::max(1, n / 64);
    for (int g = 0; g < n; g += step) {
      (void)c.node_of(g);
      (void)c.rail_of(g);
      (void)c.leaf_of(g);
      (void)c.injection_bw(g);
    }
    for (int dst : {n - 1, n / 2, std::min(1, n - 1)}) {
      Route r = c.route(0, dst);
      FUZZ_CHECK(dst == 0 || r.hops() >= 1, "empty route between different GPUs");
      std::vector<Vertex> vs = c.route_vertices(0, r);
      FUZZ_CHECK(vs.size() == r.links.size() + 1, "route_vertices size");
      for (int id : r.links) FUZZ_CHECK(id >= 0 && id < c.num_links(), "route link id out of range");
    }
    if (c.num_vertices() <= 512) (void)c.bisection_bw();
  });
  if (c.num_links() > 20000) return;  // keep one input well under a second
  for (ClusterJsonStyle style : {ClusterJsonStyle::Parameters, ClusterJsonStyle::Links}) {
    json j;
    must("cluster_to_json", [&] { j = cluster_to_json(c, style); });
    must("cluster_from_json(cluster_to_json(c))", [&] {
      Cluster back = cluster_from_json(j, "written.json", "written");
      FUZZ_CHECK(back.num_gpus() == c.num_gpus() && back.num_links() == c.num_links() &&
                     back.num_vertices() == c.num_vertices(),
                 "cluster_to_json does not load back to a cluster of the same size: " + j.dump().substr(0, 2000));
    });
  }
  if (c.num_vertices() <= 4096) must("to_dot", [&] { (void)to_dot(c); });
}

// ---- models ----

void check_loaded_model(const ModelSpec& m) {
  must("model quantities", [&] {
    const std::int64_t total = m.total_params(), active = m.active_params();
    FUZZ_CHECK(total > 0 && active > 0 && active <= total,
               "total " + std::to_string(total) + ", active " + std::to_string(active));
    (void)m.active_params_as_card();
    FUZZ_CHECK(m.kv_bytes_per_token(2) > 0, "KV bytes per token not positive");
    FUZZ_CHECK(m.num_moe_layers() >= 0 && m.num_moe_layers() <= m.layers, "num_moe_layers out of range");
    if (m.is_moe()) validate_routing_shape(m.routing_shape(), "model");
  });
  json j;
  must("model_to_json", [&] { j = model_to_json(m); });
  ModelSpec back;
  must("model_from_json(model_to_json(m))", [&] { back = model_from_json(j, "written.json"); });
  FUZZ_CHECK(back == m, "model_to_json does not load back to the same model: " + j.dump());
}

// ---- request traces ----

void check_loaded_trace(const RequestTrace& t) {
  FUZZ_CHECK(!t.requests.empty(), "a loaded trace has no requests");
  FUZZ_CHECK(t.requests.front().arrival_s == 0, "first arrival " + std::to_string(t.requests.front().arrival_s));
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const Request& r = t.requests[i];
    FUZZ_CHECK(std::isfinite(r.arrival_s) && r.arrival_s >= 0,
               "request " + std::to_string(i) + ": arrival " + std::to_string(r.arrival_s));
    FUZZ_CHECK(i == 0 || r.arrival_s >= t.requests[i - 1].arrival_s, "arrivals not sorted at request " + std::to_string(i));
    FUZZ_CHECK(r.prompt_tokens >= 1, "request " + std::to_string(i) + ": prompt " + std::to_string(r.prompt_tokens));
    FUZZ_CHECK(r.output_tokens >= 0, "request " + std::to_string(i) + ": output " + std::to_string(r.output_tokens));
  }
  must("trace statistics", [&] {
    RequestTraceStats s = request_trace_stats(t);
    FUZZ_CHECK(s.count == t.requests.size(), "stats count");
    FUZZ_CHECK(std::isfinite(s.duration_s) && std::isfinite(s.rate_per_s) && std::isfinite(s.prompt.mean),
               "non-finite statistics");
    (void)head(t, t.requests.size() / 2 + 1);
    (void)scale_rate(t, 2.5);
  });
}

// ---- routing ----

namespace {

void check_ids(const RoutingShape& s, const std::vector<ExpertId>& ids, bool distinct, const char* what) {
  const std::size_t k = static_cast<std::size_t>(s.top_k);
  for (ExpertId id : ids)
    FUZZ_CHECK(id < s.experts, std::string(what) + ": expert id " + std::to_string(id) + " ≥ experts " + std::to_string(s.experts));
  if (!distinct) return;
  std::vector<ExpertId> one(k);
  for (std::size_t at = 0; at + k <= ids.size(); at += k) {
    std::copy_n(ids.begin() + static_cast<std::ptrdiff_t>(at), k, one.begin());
    std::sort(one.begin(), one.end());
    FUZZ_CHECK(std::adjacent_find(one.begin(), one.end()) == one.end(), std::string(what) + ": repeated expert in a top-k");
  }
}

}  // namespace

void check_routing(const RoutingSource& src, const std::vector<std::uint32_t>& requests,
                   const std::vector<std::uint32_t>& positions, bool distinct) {
  const RoutingShape& s = src.shape();
  must("validate_routing_shape", [&] { validate_routing_shape(s, "loaded"); });
  const std::size_t n = s.ids_per_token(), k = static_cast<std::size_t>(s.top_k);
  constexpr std::uint32_t count = 3;
  must("routing queries", [&] {
    ExpertLoad load(s);
    for (std::uint32_t r : requests)
      for (std::uint32_t p : positions) {
        if (p > std::numeric_limits<std::uint32_t>::max() - count) p -= count;
        std::vector<ExpertId> range(count * n);
        src.route_tokens(r, p, count, range);
        check_ids(s, range, distinct, "route_tokens");
        load.add(range);
        std::vector<ExpertId> one(n);
        for (std::uint32_t i = 0; i < count; ++i) {
          src.route_token(r, p + i, one);
          FUZZ_CHECK(std::equal(one.begin(), one.end(), range.begin() + static_cast<std::ptrdiff_t>(i * n)),
                     "route_token differs from route_tokens at request " + std::to_string(r) + ", position " +
                         std::to_string(p + i));
        }
        std::vector<ExpertId> layer_ids(k);
        for (int layer : {0, s.moe_layers / 2, s.moe_layers - 1}) {
          src.route(r, p, layer, layer_ids);
          FUZZ_CHECK(std::equal(layer_ids.begin(), layer_ids.end(), range.begin() + static_cast<std::ptrdiff_t>(layer * k)),
                     "route differs from route_tokens at request " + std::to_string(r) + ", position " +
                         std::to_string(p) + ", layer " + std::to_string(layer));
        }
        std::vector<int> layers = {0};
        if (s.moe_layers > 2) layers.push_back(s.moe_layers / 2);
        if (s.moe_layers > 1) layers.push_back(s.moe_layers - 1);
        std::vector<ExpertId> sub(count * layers.size() * k);
        src.route_layers(r, p, count, layers, sub);
        check_ids(s, sub, distinct, "route_layers");
      }
    FUZZ_CHECK(load.tokens() == requests.size() * positions.size() * count, "ExpertLoad token count");
    const std::vector<std::uint64_t> total = load.total();
    const Imbalance im = imbalance_of(total);
    FUZZ_CHECK(std::isfinite(im.ratio) && std::isfinite(im.cv) && std::isfinite(im.gini), "imbalance not finite");
    for (int ranks : {1, std::min(s.experts, 3), s.experts})
      for (const char* kind : {"contiguous", "round-robin"}) (void)rank_loads(total, ExpertPlacement::make(kind, s.experts, ranks, "fuzz"));
  });
}

}  // namespace fuzz
