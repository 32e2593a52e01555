// optimizers/algorithms/rl_critic.cpp — the prefix critic's ridge fit (see rl_critic.hpp).
#include "optimizers/algorithms/rl_critic.hpp"

#include <Eigen/Dense>
#include <stdexcept>

namespace shardsim {

PrefixCritic::PrefixCritic(std::vector<int> values, int history, double ridge)
    : n_(static_cast<int>(values.size())), history_(static_cast<std::size_t>(history)), ridge_(ridge) {
  params_ = n_;
  for (int v : values) {
    offset_.push_back(params_);
    params_ += v;
  }
}

void PrefixCritic::add(const Genes& genes, const Score& score) {
  if (static_cast<int>(genes.size()) != n_) throw std::logic_error("PrefixCritic::add: genome does not match");
  kept_.emplace_back(genes, score);
  if (kept_.size() > history_) kept_.erase(kept_.begin());
}

// Normal equations over every (sample, decision) row: row (s, d) has a 1 at c_d and at θ_j[g_j]
// for j < d — the θ entries of row d are row d−1's plus g_{d−1}'s (`active`).
bool PrefixCritic::fit(const std::function<double(const Score&)>& reward, int min_samples) {
  fitted_ = false;
  if (static_cast<int>(kept_.size()) < min_samples) return false;
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(params_, params_);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(params_);
  std::vector<int> active;
  for (const auto& [genes, score] : kept_) {
    const double r = reward(score);
    active.clear();
    for (int d = 0; d < n_; ++d) {
      // Row d: c_d and the θ entries in `active` (decisions before d).
      A(d, d) += 1;
      b(d) += r;
      for (int i : active) {
        A(d, i) += 1;
        A(i, d) += 1;
        b(i) += r;
        for (int k : active) A(i, k) += 1;
      }
      active.push_back(offset_[static_cast<std::size_t>(d)] + genes[static_cast<std::size_t>(d)]);
    }
  }
  for (int i = n_; i < params_; ++i) A(i, i) += ridge_;
  w_ = std::vector<double>(static_cast<std::size_t>(params_));
  Eigen::Map<Eigen::VectorXd>(w_.data(), params_) = A.ldlt().solve(b);
  fitted_ = true;
  return true;
}

std::vector<double> PrefixCritic::values(const Genes& genes) const {
  if (!fitted_) throw std::logic_error("PrefixCritic::values: not fitted");
  std::vector<double> v(static_cast<std::size_t>(n_));
  double theta = 0;
  for (int d = 0; d < n_; ++d) {
    v[static_cast<std::size_t>(d)] = w_[static_cast<std::size_t>(d)] + theta;
    theta += w_[static_cast<std::size_t>(offset_[static_cast<std::size_t>(d)] + genes[static_cast<std::size_t>(d)])];
  }
  return v;
}

}  // namespace shardsim
