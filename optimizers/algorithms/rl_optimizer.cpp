// optimizers/algorithms/rl_optimizer.cpp — elite history, sampling without repeats, rewards, policy-gradient step.
#include "optimizers/algorithms/rl_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "common/input_error.hpp"

namespace shardsim {

namespace {

// rl.local=auto: local moves take this share of the proposals when the budget covers less than
// kLocalSpace of the space's distinct plans, and none otherwise (docs/rl.md, "Local moves").
constexpr double kLocalShare = 0.25, kLocalSpace = 0.01;

struct Settings {
  int elite, per_degree, batch, dim, retries, screen;
  bool dim_given;
  double lr, entropy, risk, imitate;
  double copy = 1;  // initial β of a fresh policy
  double local = 0;  // share of proposals that are local moves around a top elite
  int local_free = 1;
  bool critic = false;  // baseline: the prefix critic instead of the batch's mean
  int critic_history = 256;
  bool rank_shaping;
  bool seed_portfolio;
  std::string policy_in;
};

Settings read_settings(const OptimizerContext& ctx, const std::string& name) {
  auto integer = [&](const char* key, long fallback, long lo, long hi) {
    return static_cast<int>(ctx.integer(name, key, fallback, lo, hi));
  };
  auto real = [&](const char* key, double fallback, double lo, double hi) { return ctx.real(name, key, fallback, lo, hi); };
  Settings s;
  s.elite = integer("elite", 16, 1, 1024);
  s.per_degree = integer("per_degree", 3, 1, 1024);
  s.retries = integer("retries", 20, 0, 1000);
  s.screen = integer("screen", 64, 0, 100000);
  s.batch = integer("batch", 16, 2, 4096);
  s.dim_given = !ctx.text(name, "dim", "").empty();
  s.dim = integer("dim", 16, 2, 256);
  s.lr = real("lr", 0.05, 1e-6, 10);
  s.entropy = real("entropy", 0.05, 0, 10);
  s.risk = real("risk", 1, 0.01, 1);
  s.imitate = real("imitate", 0.5, 0, 100);
  s.copy = real("copy", 1, 0, 100);
  if (ctx.text(name, "local", "auto") == "auto")
    s.local = static_cast<double>(ctx.budget) < kLocalSpace * ctx.space->canonical_size() ? kLocalShare : 0.0;
  else
    s.local = real("local", 0, 0, 1);
  s.local_free = integer("local_free", 1, 1, 64);
  const std::string shaping = ctx.text(name, "shaping", "rank");
  if (shaping != "rank" && shaping != "zscore")
    throw InputError("--param", name + ".shaping", "\"" + shaping + "\" is not rank or zscore");
  s.rank_shaping = shaping == "rank";
  const std::string baseline = ctx.text(name, "baseline", "batch");
  if (baseline != "batch" && baseline != "critic")
    throw InputError("--param", name + ".baseline", "\"" + baseline + "\" is not batch or critic");
  s.critic = baseline == "critic";
  s.critic_history = integer("critic_history", 256, 16, 100000);
  // Settings of the other baseline are refused rather than silently ignored.
  for (const char* key : {"risk", "shaping"})
    if (s.critic && !ctx.text(name, key, "").empty())
      throw InputError("--param", name + "." + key,
                       "applies to the batch baseline; with " + name + ".baseline=critic each decision is weighed by its own advantage");
  if (!s.critic && !ctx.text(name, "critic_history", "").empty())
    throw InputError("--param", name + ".critic_history", "applies to " + name + ".baseline=critic only");
  s.seed_portfolio = integer("seed_portfolio", 1, 0, 1) == 1;
  s.policy_in = ctx.text(name, "policy_in", "");
  return s;
}

RlPolicy make_policy(const Settings& s, const OptimizerContext& ctx, const std::string& name, bool attention) {
  if (s.policy_in.empty()) {
    RlPolicy p(s.dim, attention, ctx.seed);
    p.bind(*ctx.space);
    p.set_copy_weight(s.copy);
    return p;
  }
  std::ifstream in(s.policy_in, std::ios::binary);
  if (!in) throw InputError(s.policy_in, "", "cannot read the policy file (" + name + ".policy_in)");
  std::ostringstream text;
  text << in.rdbuf();
  RlPolicy p = RlPolicy::load(text.str(), s.policy_in, attention, ctx.seed);
  if (s.dim_given && s.dim != p.dim())
    throw InputError("--param", name + ".dim",
                     std::to_string(s.dim) + " differs from the policy file's dim " + std::to_string(p.dim()) + " (" +
                         s.policy_in + ")");
  p.bind(*ctx.space);
  return p;
}

}  // namespace

RlOptimizer::RlOptimizer(const OptimizerContext& ctx, const std::string& name, bool attention)
    : space_(*ctx.space), name_(name), policy_(1, attention, ctx.seed), adam_(0.05), rng_(name, ctx.seed) {
  const Settings s = read_settings(ctx, name);
  elite_size_ = s.elite;
  per_degree_ = s.per_degree;
  batch_ = s.batch;
  retries_ = s.retries;
  screen_ = s.screen;
  entropy_ = s.entropy;
  risk_ = s.risk;
  imitate_ = s.imitate;
  rank_shaping_ = s.rank_shaping;
  seed_portfolio_ = s.seed_portfolio;
  local_ = s.local;
  local_free_ = s.local_free;
  if (s.critic) {
    std::vector<int> values;
    for (const auto& d : space_.decisions()) values.push_back(static_cast<int>(d.size()));
    critic_ = std::make_unique<PrefixCritic>(std::move(values), s.critic_history, 1.0);
  }
  policy_ = make_policy(s, ctx, name, attention);
  adam_ = Adam(s.lr);
  std::set<std::string> seen;
  for (const auto& g : ctx.portfolio)
    if (space_.in_range(g) && seen.insert(space_.key(g)).second) portfolio_.push_back(space_.canonical(g));
}

double RlOptimizer::reward(const Score& s) const {
  if (s.failed) return -1;
  if (!s.feasible) return -0.2 - 0.8 * std::min(1.0, std::max(0.0, s.violation));
  if (best_objective_ <= 0) return 0;
  return std::clamp(s.objective / best_objective_, 0.0, 1.0);
}

std::vector<EliteToken> RlOptimizer::elite_tokens() const {
  std::vector<EliteToken> out;
  const int k = static_cast<int>(elites_.size());
  for (int i = 0; i < k; ++i) {
    EliteToken t;
    t.genes = elites_[static_cast<std::size_t>(i)].genes;
    t.rank = k > 1 ? 1.0 - static_cast<double>(i) / (k - 1) : 1.0;
    t.reward = reward(elites_[static_cast<std::size_t>(i)].score);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Evaluated> RlOptimizer::elites() const {
  std::vector<Evaluated> out;
  for (const auto& e : elites_) out.push_back({e.genes, e.score});
  return out;
}

std::vector<Genes> RlOptimizer::ask(int n) {
  std::vector<Genes> out;
  pending_.clear();
  screened_.clear();
  while (static_cast<int>(out.size()) < n && seed_portfolio_ && next_portfolio_ < portfolio_.size()) {
    const Genes& g = portfolio_[next_portfolio_++];
    if (!proposed_.insert(space_.key(g)).second) continue;
    trie_.insert(space_, g);
    out.push_back(g);
    pending_.push_back({Episode{g, {}, 0, 0, {}}, false});
  }
  if (static_cast<int>(out.size()) >= n) return out;
  pending_tokens_ = elite_tokens();
  const RlPolicy::Context ctx = policy_.encode(pending_tokens_);
  DecodeCache cache;
  // The trie rules out every genome sampled before; the key check catches the rare genome that is
  // not canonical (decoded under a fallback mask) and equals an earlier plan.
  for (int misses = 0; static_cast<int>(out.size()) < n && !trie_.exhausted() && misses < 100;) {
    // A local move: a top elite with a few decisions redrawn from π (learned from through the
    // elites only: its other decisions were not drawn from π).
    const bool local = local_ > 0 && !elites_.empty() && rng_.uniform() < local_;
    const Genes anchor = local ? local_anchor() : Genes{};
    const Genes* a = local ? &anchor : nullptr;
    Episode ep;
    bool fresh = false;
    for (int t = 0; t < retries_ && !fresh; ++t) {
      ep = policy_.sample(ctx, rng_, nullptr, 1.0 + 0.25 * t, &cache, a);
      fresh = !proposed_.count(space_.key(ep.genes));
    }
    if (fresh)
      trie_.insert(space_, ep.genes);
    else
      ep = policy_.sample(ctx, rng_, &trie_, 1.0 + 0.25 * retries_, &cache, a);
    if (!proposed_.insert(space_.key(ep.genes)).second) {
      ++misses;
      continue;
    }
    if (static_cast<int>(screened_.size()) < screen_) {  // a plan check_plan refuses costs no budget
      const PlanCheck chk = space_.check(ep.genes);
      if (!chk.feasible()) {
        if (!local) screened_.push_back({std::move(ep), infeasible_score(chk)});
        ++screened_total_;
        continue;
      }
    }
    out.push_back(ep.genes);
    pending_.push_back({std::move(ep), !local});
  }
  return out;
}

Genes RlOptimizer::local_anchor() {
  Genes anchor = elites_[static_cast<std::size_t>(rng_.below(std::min<int>(3, static_cast<int>(elites_.size()))))].genes;
  std::vector<int> open;  // decisions with a choice
  for (int d = 0; d < space_.num_decisions(); ++d)
    if (space_.decisions()[static_cast<std::size_t>(d)].size() > 1) open.push_back(d);
  for (int k = 0; k < local_free_ && !open.empty(); ++k) {
    const int i = rng_.below(static_cast<int>(open.size()));
    anchor[static_cast<std::size_t>(open[static_cast<std::size_t>(i)])] = -1;
    open.erase(open.begin() + i);
  }
  return anchor;
}

void RlOptimizer::tell(const std::vector<Evaluated>& results) {
  if (results.size() != pending_.size()) throw std::logic_error(name_ + ": tell() does not answer the last ask()");
  for (const auto& r : results)
    if (r.score.feasible && !r.score.failed) best_objective_ = std::max(best_objective_, r.score.objective);
  std::vector<Episode> samples;
  std::vector<double> rewards;
  std::vector<Score> scores;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (pending_[i].sampled) {
      samples.push_back(pending_[i].episode);
      rewards.push_back(reward(results[i].score));
      scores.push_back(results[i].score);
    }
  if (!rewards.empty()) {
    double mean = 0;
    for (double r : rewards) mean += r;
    mean_rewards_.push_back(mean / static_cast<double>(rewards.size()));
  }
  for (auto& [ep, score] : screened_) {  // the plans screened out at ask: learned from, never scored
    samples.push_back(std::move(ep));
    rewards.push_back(reward(score));
    scores.push_back(score);
  }
  screened_.clear();
  if (samples.size() >= 2) learn(samples, rewards);
  if (critic_) {  // refitted after the update, so a batch's baseline never saw the batch
    for (std::size_t i = 0; i < samples.size(); ++i) critic_->add(samples[i].genes, scores[i]);
    critic_->fit([this](const Score& sc) { return reward(sc); }, 2 * batch_);
  }
  update_elites(results);
  pending_.clear();
}

void RlOptimizer::learn(const std::vector<Episode>& samples, const std::vector<double>& rewards) {
  const std::size_t n = rewards.size();
  const double b = static_cast<double>(n);
  auto mean_sd = [b](const std::vector<double>& x) {
    double m = 0, v = 0;
    for (double e : x) m += e / b;
    for (double e : x) v += (e - m) * (e - m) / b;
    return std::pair<double, double>{m, std::sqrt(v)};
  };
  // What the policy-gradient term sees: the rewards (zscore) or their ranks in the batch (rank).
  std::vector<double> u = rewards;
  if (rank_shaping_)
    for (std::size_t i = 0; i < n; ++i) {
      u[i] = 0;
      for (std::size_t j = 0; j < n; ++j) u[i] += rewards[j] < rewards[i] ? 1.0 : rewards[j] == rewards[i] ? 0.5 : 0.0;
    }
  const auto [u_mean, u_sd] = mean_sd(u);
  double baseline = u_mean;
  if (risk_ < 1) {
    std::vector<double> sorted = u;
    std::sort(sorted.begin(), sorted.end());
    baseline = sorted[static_cast<std::size_t>(std::floor((1 - risk_) * (b - 1)))];
  }
  const auto [r_mean, r_sd] = mean_sd(rewards);
  std::vector<Episode> episodes;
  for (std::size_t i = 0; i < n; ++i) {
    Episode ep = samples[i];
    ep.entropy = entropy_ / b;
    if (critic_) {  // the rewards themselves, less the expected reward at each decision
      ep.weight = r_sd > 1e-12 ? (rewards[i] - r_mean) / r_sd / b : 0.0;  // until the critic is fitted
      if (r_sd > 1e-12 && critic_->fitted()) {
        ep.step_weights = critic_->values(ep.genes);
        for (double& w : ep.step_weights) w = (rewards[i] - w) / r_sd / b;
      }
    } else {
      if (risk_ < 1 && u[i] < baseline) continue;
      ep.weight = u_sd > 1e-12 ? (u[i] - baseline) / u_sd / b : 0.0;  // no spread: entropy bonus only
    }
    episodes.push_back(std::move(ep));
  }
  // Self-imitation: the elites the batch was sampled against whose reward beats the batch mean,
  // weighted by how far, in batch standard deviations.
  if (imitate_ > 0 && r_sd > 1e-12) {
    std::vector<Episode> good;
    for (const auto& e : elites_) {
      const double r = reward(e.score);
      if (r <= r_mean) continue;
      Episode ep = policy_.episode_of(e.genes);
      bool allowed = true;
      for (std::size_t d = 0; d < ep.genes.size() && allowed; ++d)
        allowed = ep.masks[d][static_cast<std::size_t>(ep.genes[d])] != 0;
      if (!allowed) continue;
      ep.weight = (r - r_mean) / r_sd;
      good.push_back(std::move(ep));
    }
    for (auto& ep : good) {
      ep.weight *= imitate_ / static_cast<double>(good.size());
      episodes.push_back(std::move(ep));
    }
  }
  std::vector<Eigen::MatrixXd> grad = policy_.params().zeros();
  policy_.loss(pending_tokens_, episodes, &grad);
  adam_.step(policy_.params(), grad);
}

void RlOptimizer::update_elites(const std::vector<Evaluated>& results) {
  const auto& decs = space_.decisions();
  bool has_degrees = false;
  for (const auto& d : decs) has_degrees |= d.block == Block::Degrees;
  std::vector<Elite> cand = elites_;
  std::set<std::string> keys;
  for (const auto& e : elites_) keys.insert(e.key);
  for (const auto& r : results) {
    if (r.score.failed) continue;
    Elite e;
    e.genes = space_.canonical(r.genes);
    e.key = space_.key(e.genes);
    if (!keys.insert(e.key).second) continue;
    for (std::size_t d = 0; d < decs.size(); ++d)
      if (decs[d].block == Block::Degrees) e.degrees += std::to_string(e.genes[d]) + ".";
    e.score = r.score;
    cand.push_back(std::move(e));
  }
  std::stable_sort(cand.begin(), cand.end(), [](const Elite& a, const Elite& b) {
    if (better(a.score, b.score)) return true;
    if (better(b.score, a.score)) return false;
    return a.key < b.key;
  });
  elites_.clear();
  std::map<std::string, int> per_degree;
  for (auto& e : cand) {
    if (static_cast<int>(elites_.size()) >= elite_size_) break;
    if (has_degrees && per_degree[e.degrees] >= per_degree_) continue;
    ++per_degree[e.degrees];
    elites_.push_back(std::move(e));
  }
}

}  // namespace shardsim
