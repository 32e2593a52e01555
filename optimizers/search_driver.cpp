// optimizers/search_driver.cpp — the TBB driver: runs in a task group, batches in parallel_for.
#include "optimizers/search_driver.hpp"

#include <chrono>
#include <memory>
#include <mutex>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

namespace shardsim {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SearchOutcome run_search(const SearchSpace& space, const Evaluator& evaluator, const std::vector<SearchRun>& runs,
                         const SearchSettings& settings, const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  // Build every optimizer first: a bad parameter or an exhaustive refusal fails before any work.
  std::vector<std::unique_ptr<BudgetedOptimizer>> opts;
  for (const auto& r : runs) {
    const long budget = r.budget > 0 ? r.budget : settings.budget;
    OptimizerContext ctx{&space, r.seed, budget, settings.portfolio, settings.params};
    opts.push_back(std::make_unique<BudgetedOptimizer>(r.optimizer, make_optimizer(r.optimizer, ctx), space, budget));
  }
  SearchOutcome out;
  out.runs.resize(runs.size());
  EvalCache cache;
  std::mutex serial_mu, progress_mu;
  const bool serial = evaluator.thread_safety() == ThreadSafety::None;

  auto score_one = [&](const Genes& g, bool& hit) {
    return cache.get(
        space.key(g),
        [&] {
          PlanCheck chk = space.check(g);
          if (!chk.feasible()) return infeasible_score(chk);
          Plan plan = space.decode(g);
          if (serial) {
            std::lock_guard<std::mutex> lock(serial_mu);
            return evaluator.evaluate(plan);
          }
          return evaluator.evaluate(plan);
        },
        hit);
  };

  auto run_one = [&](std::size_t i) {
    BudgetedOptimizer& opt = *opts[i];
    RunRecord& rec = out.runs[i];
    rec.optimizer = runs[i].optimizer;
    rec.seed = runs[i].seed;
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      std::vector<Genes> batch = opt.ask();
      if (batch.empty()) break;
      std::vector<Evaluated> results(batch.size());
      std::vector<char> hits(batch.size(), 0);
      tbb::parallel_for(std::size_t{0}, batch.size(), [&](std::size_t k) {
        bool hit = false;
        results[k] = Evaluated{batch[k], score_one(batch[k], hit)};
        hits[k] = hit;
      });
      opt.tell(results);
      for (std::size_t k = 0; k < batch.size(); ++k) {
        rec.cache_hits += hits[k];
        rec.history.push_back(results[k]);
      }
      rec.evaluations = opt.used();
      rec.anytime = opt.anytime();
      if (opt.best()) rec.has_best = true, rec.best = *opt.best();
      rec.wall_s = seconds_since(start);
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        progress(i, rec);
      }
    }
    rec.state = opt.optimizer().state();
    rec.wall_s = seconds_since(start);
  };

  tbb::task_arena arena(std::max(1, settings.threads));
  arena.execute([&] {
    tbb::task_group group;
    for (std::size_t i = 0; i < runs.size(); ++i) group.run([&, i] { run_one(i); });
    group.wait();
  });
  for (const auto& r : out.runs) out.evaluations += r.evaluations;
  out.cache_hits = cache.hits();
  out.computed = cache.misses();
  out.wall_s = seconds_since(t0);
  return out;
}

}  // namespace shardsim
