// optimizers/space/evaluator.cpp — the evaluation cache.
#include "optimizers/space/evaluator.hpp"

namespace shardsim {

Evaluation EvalCache::get(const std::string& key, const std::function<Evaluation()>& compute, bool& hit) {
  std::promise<Evaluation> promise;
  std::shared_future<Evaluation> future;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      hit = true;
      future = it->second;
    } else {
      ++misses_;
      hit = false;
      future = promise.get_future().share();
      map_.emplace(key, future);
    }
  }
  if (hit) return future.get();
  Evaluation ev;
  try {
    ev = compute();
  } catch (const std::exception& e) {
    ev = Evaluation{};
    ev.score.failed = true;
    ev.score.violation = 1e9;
    ev.score.reason = std::string("evaluation failed: ") + e.what();
  }
  promise.set_value(ev);
  return ev;
}

long EvalCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

long EvalCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

std::size_t EvalCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace shardsim
