// sim/plan/plan_layout.cpp — rank mapping and group enumeration.
#include "sim/plan/plan_layout.hpp"

namespace shardsim {

const char* to_string(GroupKind k) {
  switch (k) {
    case GroupKind::Tp: return "tp";
    case GroupKind::AttnDp: return "attn_dp";
    case GroupKind::Ep: return "ep";
    case GroupKind::Etp: return "etp";
    case GroupKind::Pp: return "pp";
    case GroupKind::Dp: return "dp";
  }
  return "?";
}

std::vector<LayerRange> stage_layers(int layers, int pp) {
  std::vector<LayerRange> out;
  if (pp < 1) return out;
  int base = layers / pp, extra = layers % pp;
  // Extra layers go to the stages nearest the middle, away from embedding / LM head.
  std::vector<int> count(pp, base);
  int lo = (pp - extra) / 2;
  for (int i = 0; i < extra; ++i) ++count[lo + i];
  int first = 0;
  for (int s = 0; s < pp; ++s) {
    out.push_back({first, first + count[s]});
    first += count[s];
  }
  return out;
}

static int size_of(const Degrees& d, MapDim m) {
  switch (m) {
    case MapDim::Tp: return d.tp;
    case MapDim::AttnDp: return d.attn_dp;
    case MapDim::Pp: return d.pp;
    case MapDim::Dp: return d.dp;
  }
  return 1;
}

static int& field_of(RankCoord& c, MapDim m) {
  switch (m) {
    case MapDim::Tp: return c.tp;
    case MapDim::AttnDp: return c.attn_dp;
    case MapDim::Pp: return c.pp;
    case MapDim::Dp: return c.dp;
  }
  return c.tp;
}

PlanLayout::PlanLayout(const Plan& plan) : deg_(plan.deg), order_(plan.mapping), first_(plan.first_gpu) {
  int s = 1;
  for (MapDim m : order_) {
    stride_[static_cast<int>(m)] = s;
    s *= size_of(deg_, m);
  }
}

int PlanLayout::gpu(const RankCoord& c) const {
  return first_ + c.tp * stride_[static_cast<int>(MapDim::Tp)] + c.attn_dp * stride_[static_cast<int>(MapDim::AttnDp)] +
         c.pp * stride_[static_cast<int>(MapDim::Pp)] + c.dp * stride_[static_cast<int>(MapDim::Dp)];
}

RankCoord PlanLayout::coord(int g) const {
  RankCoord c;
  g -= first_;
  for (MapDim m : order_) {
    int n = size_of(deg_, m);
    field_of(c, m) = g % n;
    g /= n;
  }
  return c;
}

std::vector<int> PlanLayout::replica(int dp) const {
  std::vector<int> out;
  for (int s = 0; s < deg_.pp; ++s)
    for (int g : unit(s, dp)) out.push_back(g);
  return out;
}

std::vector<int> PlanLayout::unit(int pp, int dp) const {
  std::vector<int> out;
  for (int a = 0; a < deg_.attn_dp; ++a)
    for (int t = 0; t < deg_.tp; ++t) out.push_back(gpu({t, a, pp, dp}));
  return out;
}

std::vector<std::vector<int>> PlanLayout::groups(GroupKind kind) const {
  std::vector<std::vector<int>> out;
  const Degrees& d = deg_;
  switch (kind) {
    case GroupKind::Tp:
      for (int r = 0; r < d.dp; ++r)
        for (int s = 0; s < d.pp; ++s)
          for (int a = 0; a < d.attn_dp; ++a) {
            std::vector<int> g;
            for (int t = 0; t < d.tp; ++t) g.push_back(gpu({t, a, s, r}));
            out.push_back(g);
          }
      break;
    case GroupKind::AttnDp:
      for (int r = 0; r < d.dp; ++r)
        for (int s = 0; s < d.pp; ++s)
          for (int t = 0; t < d.tp; ++t) {
            std::vector<int> g;
            for (int a = 0; a < d.attn_dp; ++a) g.push_back(gpu({t, a, s, r}));
            out.push_back(g);
          }
      break;
    case GroupKind::Ep:
    case GroupKind::Etp:
      for (int r = 0; r < d.dp; ++r)
        for (int s = 0; s < d.pp; ++s) {
          std::vector<int> u = unit(s, r);
          int n = static_cast<int>(u.size());
          if (d.ep * d.etp != n) continue;  // inconsistent plan: check_plan explains
          if (kind == GroupKind::Etp) {
            for (int e = 0; e < d.ep; ++e) out.emplace_back(u.begin() + e * d.etp, u.begin() + (e + 1) * d.etp);
          } else {
            for (int k = 0; k < d.etp; ++k) {
              std::vector<int> g;
              for (int e = 0; e < d.ep; ++e) g.push_back(u[e * d.etp + k]);
              out.push_back(g);
            }
          }
        }
      break;
    case GroupKind::Pp:
      for (int r = 0; r < d.dp; ++r)
        for (int a = 0; a < d.attn_dp; ++a)
          for (int t = 0; t < d.tp; ++t) {
            std::vector<int> g;
            for (int s = 0; s < d.pp; ++s) g.push_back(gpu({t, a, s, r}));
            out.push_back(g);
          }
      break;
    case GroupKind::Dp:
      for (int s = 0; s < d.pp; ++s)
        for (int a = 0; a < d.attn_dp; ++a)
          for (int t = 0; t < d.tp; ++t) {
            std::vector<int> g;
            for (int r = 0; r < d.dp; ++r) g.push_back(gpu({t, a, s, r}));
            out.push_back(g);
          }
      break;
  }
  return out;
}

}  // namespace shardsim
