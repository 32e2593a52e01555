// sim/simgrid/scorer.cpp — a tier and its worker pool, behind one serve().
#include "sim/simgrid/scorer.hpp"

#include "common/worker_pool.hpp"

namespace shardsim {

Scorer::Scorer(Tier tier, int workers, int samples) : tier_(tier), samples_(samples) {
  if (tier_ == Tier::Analytic) return;
  pool_ = std::make_unique<WorkerPool>(workers > 0 ? workers : default_workers(), simgrid_worker_handler);
  runner_ = make_pool_runner(*pool_);
}

Scorer::~Scorer() = default;

ServingResult Scorer::serve(const ServeScenario& s, FidelityReport& report) const { return serve(s, report, tier_); }

ServingResult Scorer::serve(const ServeScenario& s, FidelityReport& report, Tier tier) const {
  return serve_at_fidelity(tier, s.plan, s.model, s.cluster, s.cluster_spec, s.trace, s.routing, s.options, runner_.get(),
                           report, samples_);
}

}  // namespace shardsim
