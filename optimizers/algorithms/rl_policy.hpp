// optimizers/algorithms/rl_policy.hpp — the RL optimizer's policy: an attention decoder over an elite history
// that builds a genome decision by decision, with hand-derived gradients, Adam, and save/load.
//
// Owns:
//  * ParamTable — the policy's parameters as matrices keyed by *meaning*, not by index, so a policy
//    trained on one search space loads into another (a different model or cluster has other
//    decision counts and value counts): entries present are reused, missing ones are created.
//    Keys: "q:<decision>" (decision embedding), "q:factor#position", "e:<decision>=<label>" (value
//    embedding), "b:<decision>=<label>" (value bias), and the shared matrices W_s, W_t, w_r, b_t,
//    W_k, W_v, W_o, b_o, beta. <decision> is "factor" (every prime-factor gene), "etp split",
//    "sp", "shard <op>", "mapping", "max_seqs", "max_batch_tokens".
//  * decision_mask — the values decision d may take given the genes before it: the space's
//    validity mask (SearchSpace::valid_values) narrowed to canonical representatives (factor
//    genes of equal primes non-decreasing; a sharding or mapping value that canonicalises to
//    itself), so every plan has one decoding. Falls back to the validity mask when that is empty.
//  * PlanTrie — the genomes proposed so far as a prefix tree, so sampling can avoid them exactly.
//  * DecodeCache — a per-ask memo of masks and logits by prefix (redrawn samples share prefixes).
//  * RlPolicy — the decoder (D = dim):
//      elite token  t_i = tanh(W_t m_i + w_r f_i + b_t),  m_i = mean_j e[j, g_ij],  f_i = (rank, reward)
//      keys/values  k_i = W_k t_i,  v_i = W_v t_i
//      query        q_d = tanh(Q_d + φ_d Q_pos + W_s s_d),  s_d = mean_{j<d} e[j, g_j]  (0 at d = 0)
//      attention    a = softmax_i(k_i·q_d / √D),  c_d = Σ_i a_i v_i
//      logits       z_v = e[d,v]·(W_o [q_d; c_d] + b_o) + b[d,v] + β Σ_i a_i [g_id = v]
//      policy       π(v) = softmax over the masked values (masked logits are −∞)
//    φ_d = log(product of the primes placed before factor d) / log(GPU count) for factor genes, else 0.
//    The β term lets attention copy an elite's choice (a pointer). Without attention (rl-noattn)
//    c_d = 0 and the β term is absent; the parameter set is the same, so files are interchangeable.
//    A decision with a single allowed value is forced: it has probability 1 and no gradient.
//  * The loss of a batch of episodes: L = Σ_e [ −Σ_d w_ed log π(g_ed) − λ_e Σ_d H_ed ], H the masked
//    entropy, w_ed = w_e unless the episode carries per-decision weights (a state-dependent
//    baseline); its exact gradient by backpropagation written out by hand (rl_policy.cpp).
//  * Adam — per-entry first/second moments (β1 0.9, β2 0.999, ε 1e-8), bias-corrected.
// Save format: JSON {"format": "shardsim-rl-policy", "version": 1, "dim", "attention",
//   "params": {key: {"shape": [rows, cols], "data": [row-major numbers]}}}; numbers are written
//   with round-trip precision, so save → load gives bit-identical parameters.
// Determinism: a new entry is initialised from a random stream named by its key and the seed, so
//   the initial value of an entry does not depend on which other entries exist or their order.
// Thread-safety: one thread at a time; const methods may run concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "optimizers/space/search_space.hpp"

namespace shardsim {

class Rng;

class ParamTable {
 public:
  int size() const { return static_cast<int>(values_.size()); }
  int find(const std::string& key) const;                  // −1 when absent
  int add(const std::string& key, Eigen::MatrixXd value);  // REQUIRES: key absent
  const std::string& key(int i) const { return keys_[static_cast<std::size_t>(i)]; }
  Eigen::MatrixXd& operator[](int i) { return values_[static_cast<std::size_t>(i)]; }
  const Eigen::MatrixXd& operator[](int i) const { return values_[static_cast<std::size_t>(i)]; }
  // Zero matrices shaped like every entry (a gradient buffer).
  std::vector<Eigen::MatrixXd> zeros() const;
  // Entry indices in key order (for saving).
  const std::map<std::string, int>& index() const { return index_; }

 private:
  std::vector<std::string> keys_;
  std::vector<Eigen::MatrixXd> values_;
  std::map<std::string, int> index_;
};

// An elite plan as the policy sees it.
struct EliteToken {
  Genes genes;        // a genome of the bound space
  double rank = 1;    // 1 for the best elite … 0 for the worst
  double reward = 0;  // the optimizer's reward for its score, in [−1, 1]
};

// A genome with the masks it was decoded under, and its weights in the loss.
struct Episode {
  Genes genes;
  std::vector<std::vector<char>> masks;  // one per decision (decision_mask)
  double weight = 0;                     // w: coefficient of −log π(genes)
  double entropy = 0;                    // λ: coefficient of −Σ_d H_d
  std::vector<double> step_weights;      // when not empty, w_d per decision instead of w
  double weight_at(int d) const { return step_weights.empty() ? weight : step_weights[static_cast<std::size_t>(d)]; }
};

std::vector<char> decision_mask(const SearchSpace& space, int d, const Genes& prefix);

// The genomes proposed so far as a prefix tree over the decisions, so that sampling never repeats
// one: a leaf is full once proposed; an inner node is full when every value its decision_mask
// allows leads to a full node. Nodes cache their decision_mask. Memory: ≤ one node per decision
// per proposal.
class PlanTrie {
 public:
  PlanTrie() : nodes_(1) {}
  // Records a genome proposed by other means (e.g. the portfolio). Stops at the first gene its
  // mask does not allow (sampling cannot reach that genome anyway).
  void insert(const SearchSpace& space, const Genes& genes);
  // Every genome reachable under decision_mask has been proposed.
  bool exhausted() const { return nodes_[0].full; }
  std::size_t leaves() const { return leaves_; }

 private:
  friend class RlPolicy;
  struct Node {
    std::vector<char> mask;  // decision_mask at this prefix (empty until first visited)
    std::vector<int> child;  // per value: node index, −1 when none
    bool full = false;
  };
  // The node under `node` for value `v` (created when missing).
  int child(int node, int v);
  // Marks the leaf at the end of `path` full and updates its ancestors.
  void close(const std::vector<int>& path);
  std::vector<Node> nodes_;
  std::size_t leaves_ = 0;
};

// A memo of decoding against one Context with fixed parameters (one ask): per prefix of genes,
// the decision_mask and the logits. Redrawn samples share most prefixes, so they cost little.
// Invalid once the parameters or the context change: make a new one per ask.
class DecodeCache {
 public:
  DecodeCache() : nodes_(1) {}

 private:
  friend class RlPolicy;
  struct Node {
    std::vector<char> mask;
    Eigen::VectorXd z;       // logits per value (masked values unused); empty until computed
    std::vector<int> child;  // per value: node index, −1 when none
  };
  std::vector<Node> nodes_;
};

class RlPolicy {
 public:
  RlPolicy(int dim, bool attention, std::uint64_t seed);
  // Reads a saved policy; throws InputError(source, "/json/pointer", reason) on a malformed one.
  static RlPolicy load(const std::string& text, const std::string& source, bool attention, std::uint64_t seed);
  std::string save() const;

  // Creates the entries `space` needs that are missing and lays out its decisions. REQUIRES before
  // any method below; `space` must outlive the policy (or the next bind).
  void bind(const SearchSpace& space);
  // Sets β, the weight of the copy-an-elite's-choice term (initially 1).
  void set_copy_weight(double beta) { params_[beta_](0, 0) = beta; }

  int dim() const { return dim_; }
  bool attention() const { return attention_; }
  const ParamTable& params() const { return params_; }
  ParamTable& params() { return params_; }

  // The elite tokens, encoded once per batch.
  struct Context {
    std::vector<Genes> genes;       // per elite
    Eigen::MatrixXd m, f, t, k, v;  // D×K, 2×K, D×K, D×K, D×K
    int size() const { return static_cast<int>(genes.size()); }
  };
  Context encode(const std::vector<EliteToken>& elites) const;

  // Decodes a genome: each decision's value drawn from π at `temperature` (> 0). With a `trie`,
  // values leading only to genomes already in it are masked out too (sampling without
  // replacement), and the result is added to it. The masks used are recorded (they are those of
  // π in the loss); weight and entropy are left 0. `cache` (made for this `ctx` and the current
  // parameters) only saves work. `anchor` (one value per decision, −1 = free): the decisions it
  // fixes keep its value wherever the masks allow it, the free ones are drawn from π given them —
  // a local move around the anchor genome. REQUIRES: !trie->exhausted().
  Episode sample(const Context& ctx, Rng& rng, PlanTrie* trie = nullptr, double temperature = 1,
                 DecodeCache* cache = nullptr, const Genes* anchor = nullptr) const;
  // The episode of a given genome (its masks under teacher forcing).
  Episode episode_of(const Genes& genes) const;
  // π(· | earlier genes of `ep`) for every decision: one vector of the decision's size, 0 where
  // masked. REQUIRES: every gene of `ep` allowed by its mask.
  std::vector<std::vector<double>> probabilities(const Context& ctx, const Episode& ep) const;
  // The loss of `episodes` (see the header) and, when `grad` is given, its gradient added to
  // `*grad` (shaped like params().zeros()). REQUIRES: every gene allowed by its mask.
  double loss(const std::vector<EliteToken>& elites, const std::vector<Episode>& episodes,
              std::vector<Eigen::MatrixXd>* grad) const;

 private:
  struct DecisionLayout {
    int query = -1;                // q:<decision>
    int query_pos = -1;            // q:factor#position, factor genes only
    double position = 0;           // φ_d
    std::vector<int> embed, bias;  // per value
  };
  struct Step;  // one decision's forward values (rl_policy.cpp)
  int ensure(const std::string& key, int rows, int cols, double scale);
  void forward_step(const Context& ctx, int d, const Eigen::VectorXd& s, const std::vector<char>& mask,
                    Step& out) const;

  // Fixed after construction.
  int dim_;
  bool attention_;
  std::uint64_t seed_;
  // Grows at bind().
  ParamTable params_;
  const SearchSpace* space_ = nullptr;
  std::vector<DecisionLayout> layout_;
  int w_s_ = -1, w_t_ = -1, w_r_ = -1, b_t_ = -1, w_k_ = -1, w_v_ = -1, w_o_ = -1, b_o_ = -1, beta_ = -1;
};

class Adam {
 public:
  explicit Adam(double lr) : lr_(lr) {}
  // One step on every entry of `params` with gradient `grad` (entries added since the last step
  // start with zero moments).
  void step(ParamTable& params, const std::vector<Eigen::MatrixXd>& grad);
  long steps() const { return t_; }

 private:
  double lr_;
  long t_ = 0;
  std::vector<Eigen::MatrixXd> m_, v_;
};

}  // namespace shardsim
