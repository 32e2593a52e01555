// optimizers/algorithms/optimizer.cpp — parameters, the budget-enforcing wrapper and the seeded Rng.
#include "optimizers/algorithms/optimizer.hpp"

#include <cmath>
#include <stdexcept>

#include "common/input_error.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

OptimizerParams OptimizerParams::parse(const std::string& text, const std::string& source) {
  OptimizerParams p;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    std::size_t dot = item.find('.'), eq = item.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot > eq || dot == 0 || eq == dot + 1 || eq + 1 == item.size())
      throw InputError(source, item, "expected optimizer.key=value (e.g. ga.population=64)");
    p.set(item.substr(0, dot), item.substr(dot + 1, eq - dot - 1), item.substr(eq + 1));
  }
  return p;
}

void OptimizerParams::set(const std::string& optimizer, const std::string& key, const std::string& value) {
  values_[optimizer][key] = value;
}

std::string OptimizerParams::text(const std::string& optimizer, const std::string& key, const std::string& fallback) const {
  auto it = values_.find(optimizer);
  if (it == values_.end()) return fallback;
  auto kv = it->second.find(key);
  if (kv == it->second.end()) return fallback;
  read_[optimizer][key] = true;
  return kv->second;
}

double OptimizerParams::real(const std::string& optimizer, const std::string& key, double fallback, double lo,
                             double hi) const {
  std::string v = text(optimizer, key, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !std::isfinite(x) || x < lo || x > hi)
    throw InputError("--param", optimizer + "." + key,
                     "\"" + v + "\" is not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

long OptimizerParams::integer(const std::string& optimizer, const std::string& key, long fallback, long lo, long hi) const {
  std::string v = text(optimizer, key, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  long x = 0;
  try {
    x = std::stol(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || x < lo || x > hi)
    throw InputError("--param", optimizer + "." + key,
                     "\"" + v + "\" is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::vector<std::string> OptimizerParams::unread(const std::string& optimizer) const {
  std::vector<std::string> out;
  auto it = values_.find(optimizer);
  if (it == values_.end()) return out;
  for (const auto& [k, v] : it->second)
    if (!read_[optimizer][k]) out.push_back(k);
  return out;
}

BudgetedOptimizer::BudgetedOptimizer(std::string name, std::unique_ptr<Optimizer> opt, const SearchSpace& space,
                                     long budget)
    : name_(std::move(name)), opt_(std::move(opt)), space_(space), budget_(budget) {
  if (budget < 1) throw std::invalid_argument("BudgetedOptimizer: budget must be ≥ 1");
}

std::vector<Genes> BudgetedOptimizer::ask() {
  if (done()) return {};
  if (!pending_.empty()) throw std::logic_error("BudgetedOptimizer::ask: the last batch was not told");
  int n = static_cast<int>(std::min<long>(std::max(1, opt_->batch_size()), budget_ - used_));
  std::vector<Genes> batch = opt_->ask(n);
  if (batch.empty()) {
    done_ = true;
    return {};
  }
  if (static_cast<int>(batch.size()) > n)
    throw std::logic_error(name_ + ": asked for " + std::to_string(n) + " genomes, proposed " + std::to_string(batch.size()));
  for (auto& g : batch) {
    if (!space_.in_range(g)) throw std::logic_error(name_ + ": proposed a genome out of range");
    g = space_.canonical(g);
  }
  pending_ = batch;
  return batch;
}

void BudgetedOptimizer::tell(const std::vector<Evaluated>& results) {
  if (results.size() != pending_.size()) throw std::logic_error(name_ + ": tell() does not answer the last ask()");
  for (std::size_t i = 0; i < results.size(); ++i)
    if (results[i].genes != pending_[i]) throw std::logic_error(name_ + ": tell() genomes differ from the last ask()");
  pending_.clear();
  for (const auto& r : results) {
    ++used_;
    if (!has_best_ || better(r.score, best_.score)) best_ = r, has_best_ = true;
    anytime_.push_back(best_.score.feasible ? best_.score.objective : 0.0);
  }
  opt_->tell(results);
}

Rng::Rng(const std::string& stream, std::uint64_t seed) {
  std::uint64_t h = 0x6a09e667f3bcc909ULL;
  for (unsigned char c : stream) h = hash_combine(h, c);
  state_ = hash_combine(h, seed);
}

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  return mix64(z);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int Rng::below(int n) { return n <= 1 ? 0 : static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace shardsim
