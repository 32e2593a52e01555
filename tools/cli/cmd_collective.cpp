// tools/cli/cmd_collective.cpp — `shardsim collective`: how one collective is priced, as NCCL's
// tuner would weigh it.
//
// Owns: the table of every (algorithm, protocol) collective_candidates() prices for a collective
// over the first N GPUs of a cluster at each requested size — latency, bandwidth part, total,
// algorithm bandwidth and bus bandwidth — and which one collective_time() picks (what a step
// program's CollAlgo::Auto runs). For teaching and for holding the model against nccl-tests:
// the bus bandwidth column is nccl-tests' busbw; "transfer" is the bandwidth part (an all-to-all's
// includes its hops' route latency). Sizes: bytes with an optional K/M/G suffix
// (KiB, MiB, GiB: powers of 1,024). `--kernels trtllm|vllm|sglang` adds an engine's own one-shot
// and two-shot all-reduce beside NCCL's, as a step of that engine weighs them. Bad input throws
// InputError (exit 2).
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/input_error.hpp"
#include "common/readable_number.hpp"
#include "common/text_number.hpp"
#include "sim/plan/engine.hpp"
#include "sim/step/collective_cost.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"

namespace shardsim::cli {
namespace {

struct CollectiveOptions {
  std::string cluster = "dgx-h100:1";
  std::string kind = "all-reduce";
  int gpus = 0;  // 0: all of the cluster's
  std::string sizes = "8KiB,1MiB,16MiB,256MiB";
  std::string kernels = "nccl";  // whose all-reduce kernels beside NCCL's (EngineSettings::allreduce)
};

CollKind parse_kind(const std::string& k) {
  if (k == "all-reduce") return CollKind::AllReduce;
  if (k == "all-gather") return CollKind::AllGather;
  if (k == "reduce-scatter") return CollKind::ReduceScatter;
  if (k == "all-to-all") return CollKind::AllToAll;
  throw InputError("--kind", "kind", "expected all-reduce, all-gather, reduce-scatter or all-to-all, got \"" + k + "\"");
}

// "8KiB" / "8K" → 8192; "1.5MiB" → 1572864; "4096" → 4096.
double parse_size(const std::string& text) {
  static const std::pair<const char*, double> units[] = {{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
                                                          {"G", 1 << 30},  {"M", 1 << 20},  {"K", 1 << 10}};
  for (const auto& [suffix, scale] : units) {
    const std::string s = suffix;
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0)
      return scale * parse_real_in(text.substr(0, text.size() - s.size()), "--sizes", "sizes", 1e-9, 1e6);
  }
  return parse_real_in(text, "--sizes", "sizes", 1, 1e15);
}

// nccl-tests' bus bandwidth factor: 2(p−1)/p for an all-reduce, (p−1)/p for the others.
double bus_factor(CollKind k, int p) {
  return (k == CollKind::AllReduce ? 2.0 : 1.0) * (p - 1) / p;
}

void run(const CollectiveOptions& opt) {
  const Cluster c = load_cluster(opt.cluster);
  const int p = opt.gpus > 0 ? opt.gpus : c.num_gpus();
  if (p < 2 || p > c.num_gpus())
    throw InputError("--gpus", "gpus", "expected 2.." + std::to_string(c.num_gpus()) + " GPUs of " + c.name() + ", got " + std::to_string(p));
  const CollKind kind = parse_kind(opt.kind);
  EngineSettings engine;
  set_engine_key(engine, "allreduce", opt.kernels, "--kernels");
  const AllReduceKernels kernels = engine.allreduce;
  std::vector<double> sizes;
  std::stringstream list(opt.sizes);
  for (std::string item; std::getline(list, item, ',');) sizes.push_back(parse_size(item));
  if (sizes.empty()) throw InputError("--sizes", "sizes", "expected a comma-separated list of sizes");
  std::vector<int> gpus(static_cast<std::size_t>(p));
  std::iota(gpus.begin(), gpus.end(), 0);
  const std::size_t domains = by_domain(c, gpus).size();
  std::ostringstream out;
  out << opt.kind << " over GPUs 0.." << p - 1 << " of " << c.name() << " (" << domains << " NVLink domain"
      << (domains > 1 ? "s" : "") << "): every algorithm and protocol NCCL's tuner"
      << (kind == CollKind::AllToAll ? " would weigh — an all-to-all is NCCL's send/recv, one entry" : " weighs")
      << (kernels != AllReduceKernels::Nccl && kind == CollKind::AllReduce
              ? std::string(", and ") + to_string(kernels) + "'s own one-shot and two-shot kernels where it allows them"
              : std::string())
      << "; * = the pick (docs/communication.md)\n";
  char line[256];
  for (double bytes : sizes) {
    const std::vector<CollectiveTime> all = collective_candidates(c, kind, gpus, bytes, CollAlgo::Auto, {}, kernels);
    const CollectiveTime pick = collective_time(c, kind, gpus, bytes, CollAlgo::Auto, {}, kernels);
    out << "\n" << binary_bytes(bytes) << "\n";
    std::snprintf(line, sizeof line, "    %-8s %-7s %12s %12s %12s %12s %12s\n", "algo", "proto", "latency us", "transfer us",
                  "total us", "algbw GB/s", "busbw GB/s");
    out << line;
    for (const CollectiveTime& t : all) {
      const double alg = bytes / t.seconds / 1e9;
      const bool chosen = t.algo == pick.algo && t.proto == pick.proto;
      std::snprintf(line, sizeof line, "  %s %-8s %-7s %12.2f %12.2f %12.2f %12.1f %12.1f\n", chosen ? "*" : " ",
                    to_string(t.algo), t.algo == CollAlgo::OneShot || t.algo == CollAlgo::TwoShot ? "-" : to_string(t.proto), t.latency * 1e6, t.bandwidth * 1e6, t.seconds * 1e6, alg,
                    alg * bus_factor(kind, p));
      out << line;
    }
  }
  std::cout << out.str();
}

}  // namespace

void add_collective_command(CLI::App& app) {
  auto opt = std::make_shared<CollectiveOptions>();
  CLI::App* sub = app.add_subcommand(
      "collective",
      "Price one collective at several sizes as NCCL's tuner weighs it: every algorithm (ring, tree, NVLS) and protocol "
      "(LL, LL128, Simple) with its latency, bandwidth part, algorithm and bus bandwidth (nccl-tests' busbw), and the one "
      "a step runs.\n\nExamples:\n"
      "  shardsim collective --cluster dgx-h100:1 --kind all-reduce --sizes 8KiB,1MiB,256MiB\n"
      "  shardsim collective --cluster dgx-h100:4 --gpus 32 --sizes 1MiB,16MiB,128MiB\n"
      "  shardsim collective --cluster dgx-h100:1 --kernels trtllm --sizes 14KiB,256KiB,4MiB");
  sub->add_option("--cluster", opt->cluster, "cluster shorthand or JSON file")->capture_default_str();
  sub->add_option("--kind", opt->kind, "all-reduce | all-gather | reduce-scatter | all-to-all")->capture_default_str();
  sub->add_option("--gpus", opt->gpus, "the first N GPUs (default: all of the cluster's)");
  sub->add_option("--sizes", opt->sizes, "comma-separated message sizes: bytes, or with K/KiB, M/MiB, G/GiB")->capture_default_str();
  sub->add_option("--kernels", opt->kernels, "nccl | trtllm | vllm | sglang: an engine's own all-reduce kernels beside NCCL's")
      ->capture_default_str();
  sub->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
