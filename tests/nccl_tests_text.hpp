// tests/nccl_tests_text.hpp — nccl-tests output as the model itself would measure it, for the
// calibration tests: header, rank lines, the test's name and one row per size (64 KiB to 1 GiB).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "sim/step/collective_cost.hpp"
#include "topologies/cluster.hpp"

namespace shardsim::test {

// nccl-tests' layout (header, ranks, rows) for `kind` on `ranks` ranks over `hosts` hosts, times from `c`.
inline std::string nccl_tests_text(const Cluster& c, CollKind kind, int ranks, int hosts, const char* name) {
  std::string t = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20\n#\n"
                  "# Using devices\n";
  for (int r = 0; r < ranks; ++r) {
    char line[160];
    std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid  %d on   node%02d device  %d [0x1b] NVIDIA H100 80GB HBM3\n", r, 1000 + r,
                  r / (ranks / hosts), r % (ranks / hosts));
    t += line;
  }
  t += std::string("# Collective test starting: ") + name + "\n";
  t += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  std::vector<int> gpus;
  for (int h = 0; h < hosts; ++h)
    for (int r = 0; r < ranks / hosts; ++r) gpus.push_back(h * c.gpus_per_node() + r);
  for (double bytes = 1 << 16; bytes <= (1 << 30); bytes *= 4) {
    const double us = collective_time(c, kind, gpus, bytes).seconds * 1e6;
    char line[200];
    std::snprintf(line, sizeof line, "  %12.0f  %12.0f     float     sum      -1  %8.2f  %6.2f  %6.2f      0  %8.2f  %6.2f  %6.2f      0\n", bytes,
                  bytes / 4, us, bytes / us / 1e3, bytes / us / 1e3, us, bytes / us / 1e3, bytes / us / 1e3);
    t += line;
  }
  return t;
}

}  // namespace shardsim::test
