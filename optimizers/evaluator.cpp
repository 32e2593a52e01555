// optimizers/evaluator.cpp — the evaluation cache.
#include "optimizers/evaluator.hpp"

namespace shardsim {

Score EvalCache::get(const std::string& key, const std::function<Score()>& compute, bool& hit) {
  std::promise<Score> promise;
  std::shared_future<Score> future;
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
  Score s;
  try {
    s = compute();
  } catch (const std::exception& e) {
    s = Score{};
    s.failed = true;
    s.violation = 1e9;
    s.reason = std::string("evaluation failed: ") + e.what();
  }
  promise.set_value(s);
  return s;
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
