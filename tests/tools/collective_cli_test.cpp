// tests/tools/collective_cli_test.cpp — `shardsim collective`: the tuner's table for one collective,
// its pick the one the executors run, and its sizes parsed.
#include <doctest/doctest.h>

#include <string>

#include "sim/step/collective_cost.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"

using namespace shardsim;

TEST_CASE("collective CLI: every algorithm and protocol priced, the pick marked as collective_time() takes it") {
  const auto r = test::run_cli("collective --cluster dgx-h100:4 --gpus 32 --sizes 1MiB,128M");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("1 MiB") != std::string::npos);
  CHECK(r.out.find("128 MiB") != std::string::npos);
  // Six rows a size across nodes (ring and tree, three protocols each; no NVLS), one marked.
  std::size_t rows = 0, marks = 0;
  for (std::size_t at = 0; (at = r.out.find("\n", at)) != std::string::npos; ++at) {
    const std::string rest = r.out.substr(at + 1, 12);
    if (rest.rfind("    ring", 0) == 0 || rest.rfind("    tree", 0) == 0 || rest.rfind("  * ", 0) == 0) ++rows;
    if (rest.rfind("  * ", 0) == 0) ++marks;
  }
  CHECK(rows == 12);
  CHECK(marks == 2);
  // The marked row at 1 MiB is the one a step runs.
  const Cluster c = load_cluster("dgx-h100:4");
  std::vector<int> gpus(32);
  for (int i = 0; i < 32; ++i) gpus[static_cast<std::size_t>(i)] = i;
  const CollectiveTime t = collective_time(c, CollKind::AllReduce, gpus, 1 << 20);
  const std::string marked = std::string("  * ") + to_string(t.algo);
  const std::size_t at = r.out.find(marked);
  REQUIRE(at != std::string::npos);
  CHECK(r.out.find(to_string(t.proto), at) < r.out.find("\n", at));
  CHECK(at < r.out.find("128 MiB"));
}

TEST_CASE("collective CLI: --kernels adds an engine's own all-reduce beside NCCL's, and names a bad value") {
  const auto r = test::run_cli("collective --cluster dgx-h100:1 --kernels trtllm --sizes 14KiB");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("  * one-shot") != std::string::npos);  // a decode step's all-reduce: the engine's one-shot
  CHECK(r.out.find("    two-shot") != std::string::npos);
  const auto nccl = test::run_cli("collective --cluster dgx-h100:1 --sizes 14KiB");
  REQUIRE(nccl.exit_code == 0);
  CHECK(nccl.out.find("one-shot") == std::string::npos);
  const auto bad = test::run_cli("collective --kernels nvshmem");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("nvshmem") != std::string::npos);
}

TEST_CASE("simulate says whose kernels run a plan's small TP all-reduces") {
  const std::string base = "simulate --model llama3-70b --cluster dgx-h100:1 --requests 20 --offline --fidelity analytic --plan ";
  const auto own = test::run_cli(base + "tp=8,engine=trtllm");
  REQUIRE(own.exit_code == 0);
  CHECK(own.out.find("small TP all-reduces inside a node on trtllm's own one-/two-shot kernels") != std::string::npos);
  const auto nccl = test::run_cli(base + "tp=8,allreduce=nccl");
  REQUIRE(nccl.exit_code == 0);
  CHECK(nccl.out.find("small TP all-reduces") == std::string::npos);
}
