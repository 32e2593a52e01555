// tests/sim/serving/hardware_rows_test.cpp — calibrate records what set each constant in the cluster file,
// and `validate --hw` splits the user's own rows by it: the fitting files' rows are calibration rows,
// every other file's (and the sizes below the fit's cut) check rows.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "sim/serving/hardware_rows.hpp"
#include "sim/step/kernel_calibration.hpp"
#include "tests/cli_runner.hpp"
#include "tests/nccl_tests_text.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

using namespace shardsim;

namespace {

Cluster with_nvlink(double e) {
  json j = cluster_to_json(load_cluster("dgx-h100:1"));
  j["collective_efficiency"]["nvlink"] = e;
  return cluster_from_json(j, "dgx-h100:1", "dgx-h100:1");
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// A GEMM table (calibrate's CSV) of `shapes`, each timed at `slow` × the preset H100's model.
std::string gemm_table(const std::vector<std::array<double, 3>>& shapes, double slow) {
  std::string csv = "m,n,k,dtype,latency\n";
  const GpuSpec h100 = gpu_preset("H100-SXM-80GB");
  for (const auto& s : shapes) {
    char line[128];
    std::snprintf(line, sizeof line, "%.0f,%.0f,%.0f,bf16,%.6f\n", s[0], s[1], s[2], 1e3 * slow * gemm_model_time(h100, Dtype::BF16, s[0], s[1], s[2]));
    csv += line;
  }
  return csv;
}

}  // namespace

TEST_CASE("validate --hw: the files that set a constant are calibration rows, the others check rows") {
  const std::string dir = "/tmp/shardsim_hw_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  // One 8-GPU node whose NVLink collectives run at efficiency 0.7, and whose BF16 GEMMs take 1.3× the preset's.
  const Cluster truth = with_nvlink(0.7);
  write(dir + "/ag.txt", test::nccl_tests_text(truth, CollKind::AllGather, 8, 1, "all_gather_perf"));
  write(dir + "/rs.txt", test::nccl_tests_text(truth, CollKind::ReduceScatter, 8, 1, "reduce_scatter_perf"));
  write(dir + "/gemm.csv", gemm_table({{1024, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 8192}, {2048, 4096, 8192}}, 1.3));
  write(dir + "/gemm-check.csv", gemm_table({{3072, 8192, 8192}, {6144, 4096, 8192}}, 1.3));

  // Kernels first, then the collectives on top of that file: both constants recorded, with their sources.
  auto k = test::run_cli("calibrate --kernels " + dir + "/gemm.csv --cluster dgx-h100:1 --out " + dir + "/gpu.json");
  INFO(k.err);
  REQUIRE(k.exit_code == 0);
  auto n = test::run_cli("calibrate --nccl-tests " + dir + "/ag.txt --cluster " + dir + "/gpu.json --out " + dir + "/node.json");
  INFO(n.err);
  REQUIRE(n.exit_code == 0);
  const Cluster node = load_cluster(dir + "/node.json");
  REQUIRE(node.calibration().size() == 2);
  const CalibrationRecord& kr = node.calibration()[0];
  const CalibrationRecord& nr = node.calibration()[1];
  CHECK(kr.constant == "gpu.kernels.gemm_bf16");
  CHECK(kr.kind == "kernels");
  CHECK(kr.rows == 4);
  CHECK(nr.constant == "collective_efficiency.nvlink");
  CHECK(nr.sources == std::vector<std::string>{"ag.txt"});  // relative to the cluster file
  CHECK(nr.min_bytes == doctest::Approx(1 << 20));
  CHECK(std::fabs(nr.value / 0.7 - 1) < 0.01);
  CHECK(nr.rms_log_after < nr.rms_log_before);
  // The records survive a round trip through the cluster format.
  const Cluster again = cluster_from_json(cluster_to_json(node), "x", "x");
  REQUIRE(again.calibration().size() == 2);
  CHECK(again.calibration()[1].sources == nr.sources);

  std::vector<std::string> notes;
  const std::vector<ValidationRow> rows = hardware_rows(node, {{dir + "/rs.txt"}, {dir + "/gemm-check.csv"}, {}}, notes);
  CHECK(notes.empty());
  int ag_calib = 0, ag_check = 0, rs_check = 0, gemm_calib = 0, gemm_check = 0;
  for (const auto& r : rows) {
    CAPTURE(r.name);
    const bool ag = r.source == dir + "/ag.txt", rs = r.source == dir + "/rs.txt";
    if (ag && r.role == RowRole::Calibration) {
      ++ag_calib;
      CHECK(r.sets == "collective_efficiency.nvlink");
      CHECK(r.tolerance == doctest::Approx(0.05));
      CHECK(std::fabs(r.error()) < 0.05);  // the fit recovered the efficiency that made these
    }
    ag_check += ag && r.role == RowRole::Check;  // the sizes below the fit's 1 MiB cut
    if (rs) {
      ++rs_check;
      CHECK(r.role == RowRole::Check);
      CHECK(r.tolerance == doctest::Approx(0.25));
    }
    if (r.group == "kernels") {
      (r.role == RowRole::Calibration ? gemm_calib : gemm_check)++;
      CHECK(std::fabs(r.error()) < 0.10);  // the fitted fraction carries to the held-out shapes
      CHECK((r.role == RowRole::Calibration) == (r.source == dir + "/gemm.csv"));
    }
  }
  CHECK(ag_calib == 6);  // 1 MiB … 1 GiB by ×4
  CHECK(ag_check == 2);  // 64 and 256 KiB
  CHECK(rs_check == 8);
  CHECK(gemm_calib == 1);
  CHECK(gemm_check == 1);

  // The command: both roles printed; measurement files without --hw refused; a record whose file is
  // gone is said, its rows left out.
  auto v = test::run_cli("validate --hw " + dir + "/node.json --nccl-tests " + dir + "/rs.txt");
  INFO(v.err);
  CHECK(v.exit_code == 0);
  CHECK(v.out.find(" calib ") != std::string::npos);
  CHECK(v.out.find(" check ") != std::string::npos);
  CHECK(v.out.find("7 calibration row(s)") != std::string::npos);  // 6 all-gather sizes + the GEMM file
  // Recalibrating from that file into another folder keeps the other records, their sources re-based.
  std::filesystem::create_directories(dir + "/sub");
  auto moved = test::run_cli("calibrate --kernels " + dir + "/gemm-check.csv --cluster " + dir + "/node.json --out " + dir + "/sub/again.json");
  INFO(moved.err);
  REQUIRE(moved.exit_code == 0);
  const Cluster again2 = load_cluster(dir + "/sub/again.json");
  REQUIRE(again2.calibration().size() == 2);
  CHECK(again2.calibration()[0].sources == std::vector<std::string>{"../gemm-check.csv"});  // replaced: the same constant
  CHECK(again2.calibration()[1].sources == std::vector<std::string>{"../ag.txt"});
  notes.clear();
  int calib_again = 0;
  for (const auto& r : hardware_rows(again2, {}, notes)) calib_again += r.role == RowRole::Calibration;
  CHECK(calib_again == 7);
  CHECK(notes.empty());
  auto lone = test::run_cli("validate --nccl-tests " + dir + "/rs.txt");
  CHECK(lone.exit_code == 2);
  std::filesystem::remove(dir + "/ag.txt");
  notes.clear();
  CHECK(hardware_rows(node, {}, notes).size() == 1);  // the GEMM file's one row
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("collective_efficiency.nvlink") != std::string::npos);
  std::filesystem::remove_all(dir);
}
