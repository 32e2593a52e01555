// studies/search_merge.cpp — the merged journal of several studies of one problem.
#include "studies/search_merge.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "common/output_file.hpp"
#include "optimizers/search/journal.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/search/study_dir.hpp"

namespace shardsim {

namespace {

struct Study {
  std::string path;
  json header;
  std::vector<json> evals;  // lines 2…, parsed
};

Study read_study(const std::string& dir) {
  Study s;
  s.path = (std::filesystem::path(dir) / kJournalName).string();
  const JournalContents c = read_journal(s.path);  // validates; a torn last line is left out below
  s.header = c.header;
  const std::string text = read_text_file(s.path).substr(0, c.valid_bytes);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line))
    if (!line.empty()) s.evals.push_back(json::parse(line));
  return s;
}

struct RunRef {
  std::string optimizer;
  std::uint64_t seed = 0;
  long budget = 0;
  const Study* study = nullptr;
  int index = 0;  // in its study's runs
};

std::vector<json> lines_of(const RunRef& r) {
  std::vector<json> out;
  for (const auto& e : r.study->evals)
    if (e["run"] == r.index) out.push_back(e);
  return out;
}

// Two copies of one run must hold the same evaluations (plans and scores), whatever their order.
bool same_run(const RunRef& a, const RunRef& b) {
  if (a.budget != b.budget) return false;
  const std::vector<json> x = lines_of(a), y = lines_of(b);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (const char* k : {"key", "feasible", "objective", "violation", "failed"})
      if (x[i][k] != y[i][k]) return false;
  return true;
}

int rank_of(const std::string& optimizer) {
  const auto names = optimizer_names();
  const auto it = std::find(names.begin(), names.end(), optimizer);
  return it == names.end() ? static_cast<int>(names.size()) : static_cast<int>(it - names.begin());
}


// The union of the studies' runs in canonical order, each once.
std::vector<RunRef> union_of(const std::vector<Study>& studies) {
  std::map<std::pair<std::string, std::uint64_t>, RunRef> runs;
  for (const Study& s : studies) {
    const json& list = s.header["runs"];
    for (std::size_t i = 0; i < list.size(); ++i) {
      RunRef r{list[i]["optimizer"].get<std::string>(), list[i]["seed"].get<std::uint64_t>(), list[i]["budget"].get<long>(), &s,
               static_cast<int>(i)};
      auto [it, fresh] = runs.emplace(std::make_pair(r.optimizer, r.seed), r);
      if (!fresh && !same_run(it->second, r))
        throw InputError(s.path, "/runs/" + std::to_string(i),
                         r.optimizer + " seed " + std::to_string(r.seed) + " is also in " + it->second.study->path +
                             " with other evaluations (merge combines different seeds of one problem)");
    }
  }
  std::vector<RunRef> out;
  for (auto& [k, r] : runs) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const RunRef& a, const RunRef& b) {
    const int ra = rank_of(a.optimizer), rb = rank_of(b.optimizer);
    if (ra != rb) return ra < rb;
    if (a.optimizer != b.optimizer) return a.optimizer < b.optimizer;
    return a.seed < b.seed;
  });
  return out;
}

// --optimizers and --seeds that make exactly these runs; refuses a union that is not a product.
std::pair<std::string, std::string> options_for(const std::vector<RunRef>& runs, const std::string& source) {
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::uint64_t>> seeds;
  for (const auto& r : runs) {
    if (names.empty() || names.back() != r.optimizer) names.push_back(r.optimizer);
    seeds[r.optimizer].push_back(r.seed);
  }
  std::string optimizers, range;
  std::vector<std::uint64_t> common;
  for (const auto& n : names) {
    optimizers += (optimizers.empty() ? "" : ",") + n;
    if (runs_once(n)) continue;
    const auto& s = seeds[n];
    const bool contiguous = s.back() - s.front() + 1 == s.size();
    if (!contiguous || (!common.empty() && s != common))
      throw InputError(source, "/runs",
                       "the merged runs are not every optimizer × one range of seeds (" + n + " has seeds " +
                           std::to_string(s.front()) + "…" + std::to_string(s.back()) + ", " + std::to_string(s.size()) +
                           " of them); merge studies that ran the same seeds of each optimizer, or disjoint ranges of all");
    common = s;
  }
  if (!common.empty())
    range = common.front() == 1 ? std::to_string(common.back())
                                : std::to_string(common.front()) + ".." + std::to_string(common.back());
  return {optimizers, range};
}

}  // namespace

void check_same_problem(const json& first, const std::string& first_path, const json& other, const std::string& other_path,
                        const std::vector<std::string>& may_differ, const std::string& why) {
  json a = first["inputs"], b = other["inputs"];
  for (const std::string& k : may_differ) {
    a.erase(k);
    b.erase(k);
  }
  for (const json* side : {&a, &b})
    for (auto it = side->begin(); it != side->end(); ++it) {
      const json x = a.contains(it.key()) ? a[it.key()] : json(nullptr);
      const json y = b.contains(it.key()) ? b[it.key()] : json(nullptr);
      if (x != y)
        throw InputError(other_path, "/inputs/" + it.key(), json_text(y) + " where " + first_path + " has " + json_text(x) + " (" + why + ")");
    }
}

void write_merged_journal(const std::vector<std::string>& dirs, const std::string& out) {
  if (dirs.size() < 2) throw InputError("search merge", "DIR", "give at least two study folders to merge");
  std::vector<Study> studies;
  for (const auto& d : dirs) studies.push_back(read_study(d));
  // Order-independent: the first study (whose args and inputs the merged header keeps) is the one
  // with the smallest path, not the first named.
  std::sort(studies.begin(), studies.end(), [](const Study& a, const Study& b) { return a.path < b.path; });
  for (std::size_t i = 1; i < studies.size(); ++i)
    check_same_problem(studies[0].header, studies[0].path, studies[i].header, studies[i].path, {"optimizers", "seeds", "threads"},
                       "merge combines studies of one problem: only optimizers and seeds may differ");
  const std::vector<RunRef> runs = union_of(studies);
  const auto [optimizers, seeds] = options_for(runs, studies[0].path);

  json header = studies[0].header;
  header["args"]["--optimizers"] = std::vector<std::string>{optimizers};
  header["inputs"]["optimizers"] = optimizers;
  if (!seeds.empty()) {
    header["args"]["--seeds"] = std::vector<std::string>{seeds};
    header["inputs"]["seeds"] = seeds.find("..") == std::string::npos ? json(std::stoull(seeds)) : json(seeds);
  }
  header["runs"] = json::array();
  std::string text;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    header["runs"].push_back({{"optimizer", runs[i].optimizer}, {"seed", runs[i].seed}, {"budget", runs[i].budget}});
    for (json e : lines_of(runs[i])) {
      e["run"] = i;
      text += json_text(e) + "\n";
    }
  }
  prepare_study_dir(out, true);
  write_file_atomically((std::filesystem::path(out) / kJournalName).string(), json_text(header) + "\n" + text);
}

}  // namespace shardsim
