// optimizers/search/search_driver.cpp — the TBB driver: runs in a task group, batches in parallel_for,
// journaled evaluations replayed through the same loop, stops at batch boundaries.
#include "optimizers/search/search_driver.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_set>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "common/input_error.hpp"
#include "optimizers/algorithms/scripted_optimizer.hpp"

namespace shardsim {

void FaultTally::add(const Evaluation& e) {
  auto note = [&](const std::string& msg) {
    if (!msg.empty() && errors.size() < 5 && std::find(errors.begin(), errors.end(), msg) == errors.end())
      errors.push_back(msg);
  };
  if (e.score.failed) ++failed_evaluations, note(e.score.reason);
  if (e.faults.failed > 0) ++degraded_evaluations, note(e.faults.error);
  sampled_steps += e.faults.sampled;
  failed_samples += e.faults.failed;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One asked batch and what scoring it gave.
struct Batch {
  std::vector<Genes> genes;
  std::vector<std::string> keys;
  std::vector<Evaluation> evals;
  std::vector<char> hits, replayed;
};

class Driver {
 public:
  Driver(const SearchSpace& space, const Evaluator& evaluator, const std::vector<SearchRun>& runs,
         const SearchSettings& settings, const ProgressFn& progress)
      : space_(space), evaluator_(evaluator), runs_(runs), settings_(settings), progress_(progress) {}

  SearchOutcome run() {
    const auto t0 = std::chrono::steady_clock::now();
    build_optimizers();
    out_.runs.resize(runs_.size());
    if (settings_.on_start) settings_.on_start();
    tbb::task_arena arena(std::max(1, settings_.threads));
    arena.execute([&] {
      tbb::task_group group;
      for (std::size_t i = 0; i < runs_.size(); ++i) group.run([&, i] { guarded_run(i); });
      group.wait();
    });
    finish_outcome();
    out_.wall_s = seconds_since(t0);
    return std::move(out_);
  }

 private:
  // Every optimizer first: a bad parameter or an exhaustive refusal fails before any work.
  void build_optimizers() {
    for (const auto& r : runs_) {
      const long budget = r.budget > 0 ? r.budget : settings_.budget;
      OptimizerContext ctx{&space_, r.seed, budget, settings_.portfolio, settings_.params};
      opts_.push_back(std::make_unique<BudgetedOptimizer>(r.optimizer, build(r, ctx), space_, budget));
    }
  }

  static std::unique_ptr<Optimizer> build(const SearchRun& r, const OptimizerContext& ctx) {
    if (r.script.empty()) return make_optimizer(r.optimizer, ctx);
    const auto names = optimizer_names();
    if (std::find(names.begin(), names.end(), r.optimizer) != names.end())
      throw InputError("optimizer", r.optimizer, "is a built-in optimizer's name: an outside optimizer needs another name");
    return std::make_unique<ScriptedOptimizer>(r.script);
  }

  // A failing run stops the others at their next batch boundary, then the error propagates.
  void guarded_run(std::size_t i) {
    try {
      run_one(i);
    } catch (...) {
      abort_ = true;
      throw;
    }
  }

  bool stopping() const { return abort_ || (settings_.stop && settings_.stop()); }

  const std::vector<ReplayEval>* replay_of(std::size_t i) const {
    return settings_.replay && i < settings_.replay->size() ? &(*settings_.replay)[i] : nullptr;
  }

  Evaluation compute(const Genes& g) {
    const Plan plan = space_.decode(g);  // once: the check and the evaluator share it
    const PlanCheck chk = space_.check_decoded(plan);
    if (!chk.feasible()) return Evaluation{infeasible_score(chk), {}};
    if (evaluator_.thread_safety() == ThreadSafety::None) {
      std::lock_guard<std::mutex> lock(serial_mu_);
      return evaluator_.evaluate_detailed(plan);
    }
    return evaluator_.evaluate_detailed(plan);
  }

  // The journaled evaluation (registered in the cache so hit counts match an uninterrupted run).
  Evaluation replayed(std::size_t i, const ReplayEval& r, const std::string& key, long index, bool& hit) {
    if (r.key != key)
      throw InputError(settings_.replay_source, "line " + std::to_string(r.line),
                       "run " + std::to_string(i + 1) + " (" + runs_[i].optimizer + ", seed " +
                           std::to_string(runs_[i].seed) + "), evaluation " + std::to_string(index) +
                           ": the journal has plan " + r.key + " but the optimizer now proposes " + key +
                           " (the journal was written by another version of shardsim)");
    cache_.get(key, [&] { return r.eval; }, hit);
    return r.eval;
  }

  Batch score_batch(std::size_t i, std::vector<Genes> genes, std::size_t pos, long used) {
    Batch b;
    const std::size_t n = genes.size();
    b.genes = std::move(genes);
    b.keys.resize(n), b.evals.resize(n), b.hits.assign(n, 0), b.replayed.assign(n, 0);
    const auto* rp = replay_of(i);
    tbb::parallel_for(std::size_t{0}, n, [&](std::size_t k) {
      bool hit = false;
      b.keys[k] = space_.key(b.genes[k]);
      if (rp && pos + k < rp->size()) {
        b.evals[k] = replayed(i, (*rp)[pos + k], b.keys[k], used + static_cast<long>(k) + 1, hit);
        b.replayed[k] = 1;
      } else {
        b.evals[k] = cache_.get(b.keys[k], [&] { return compute(b.genes[k]); }, hit);
      }
      b.hits[k] = hit;
    });
    return b;
  }

  void journal(std::size_t i, const Batch& b, long used) {
    if (!settings_.on_batch) return;
    std::vector<ScoredEval> fresh;
    for (std::size_t k = 0; k < b.genes.size(); ++k)
      if (!b.replayed[k]) fresh.push_back({i, used + static_cast<long>(k) + 1, b.genes[k], b.keys[k], b.evals[k]});
    if (fresh.empty()) return;
    std::lock_guard<std::mutex> lock(journal_mu_);
    settings_.on_batch(fresh);
  }

  void record(RunRecord& rec, const Batch& b, const BudgetedOptimizer& opt) {
    for (std::size_t k = 0; k < b.genes.size(); ++k) {
      rec.cache_hits += b.hits[k];
      rec.history.push_back(Evaluated{b.genes[k], b.evals[k].score});
      rec.faults.push_back(b.evals[k].faults);
      rec.tally.add(b.evals[k]);
      replayed_ += b.replayed[k];
    }
    rec.evaluations = opt.used();
    rec.anytime = opt.anytime();
    if (opt.best()) rec.has_best = true, rec.best = *opt.best();
  }

  void run_one(std::size_t i) {
    BudgetedOptimizer& opt = *opts_[i];
    RunRecord& rec = out_.runs[i];
    rec.optimizer = runs_[i].optimizer;
    rec.seed = runs_[i].seed;
    const auto start = std::chrono::steady_clock::now();
    std::size_t pos = 0;
    while (!opt.done()) {
      if (stopping()) {
        rec.complete = false;
        break;
      }
      std::vector<Genes> asked = opt.ask();
      if (asked.empty()) break;
      Batch b = score_batch(i, std::move(asked), pos, opt.used());
      pos += b.genes.size();
      journal(i, b, opt.used());
      std::vector<Evaluated> results;
      for (std::size_t k = 0; k < b.genes.size(); ++k) results.push_back(Evaluated{b.genes[k], b.evals[k].score});
      opt.tell(results);
      record(rec, b, opt);
      rec.wall_s = seconds_since(start);
      if (progress_) {
        std::lock_guard<std::mutex> lock(progress_mu_);
        progress_(i, rec);
      }
    }
    if (rec.complete) check_replay_used(i, pos);
    rec.state = opt.optimizer().state();
    rec.wall_s = seconds_since(start);
  }

  // A finished run must have used every journaled evaluation of it.
  void check_replay_used(std::size_t i, std::size_t pos) const {
    const auto* rp = replay_of(i);
    if (!rp || pos >= rp->size()) return;
    throw InputError(settings_.replay_source, "line " + std::to_string((*rp)[pos].line),
                     "run " + std::to_string(i + 1) + " (" + runs_[i].optimizer + ", seed " +
                         std::to_string(runs_[i].seed) + ") ended after " + std::to_string(pos) +
                         " evaluations but the journal has more (written by another version of shardsim)");
  }

  // Totals; faults over distinct plans, visited in run and evaluation order (deterministic).
  void finish_outcome() {
    std::unordered_set<std::string> seen;
    for (const auto& r : out_.runs) {
      out_.evaluations += r.evaluations;
      out_.complete = out_.complete && r.complete;
      for (std::size_t k = 0; k < r.history.size(); ++k)
        if (seen.insert(space_.key(r.history[k].genes)).second) out_.faults.add(Evaluation{r.history[k].score, r.faults[k]});
    }
    out_.cache_hits = cache_.hits();
    out_.computed = cache_.misses();
    out_.replayed = replayed_;
  }

  const SearchSpace& space_;
  const Evaluator& evaluator_;
  const std::vector<SearchRun>& runs_;
  const SearchSettings& settings_;
  const ProgressFn& progress_;
  std::vector<std::unique_ptr<BudgetedOptimizer>> opts_;
  SearchOutcome out_;
  EvalCache cache_;
  std::mutex serial_mu_, progress_mu_, journal_mu_;
  std::atomic<bool> abort_{false};
  std::atomic<long> replayed_{0};
};

}  // namespace

SearchOutcome run_search(const SearchSpace& space, const Evaluator& evaluator, const std::vector<SearchRun>& runs,
                         const SearchSettings& settings, const ProgressFn& progress) {
  Driver driver(space, evaluator, runs, settings, progress);
  return driver.run();
}

}  // namespace shardsim
