// common/csv_table.hpp — a CSV file whose first line names its columns: the reader the calibration
// tables share (calibrate --kernels, calibrate --power).
//
// Owns: CsvTable and read_csv_table(). Blank lines and lines starting with '#' are skipped; the
// header's names are trimmed and lower-cased (columns in any order, any case); each cell is
// trimmed, and a cell in double quotes may hold commas ("" is a quote). Errors are InputError(source,
// "line N", reason) for an unterminated quote or a row with fewer cells than the header needs.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/input_error.hpp"

namespace shardsim {

struct CsvTable {
  std::string source;
  std::map<std::string, std::size_t> columns;  // lower-cased name → index
  struct Row {
    int line = 0;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;
  bool has(const std::string& name) const { return columns.count(name) > 0; }
  // The row's cell of column `name` ("" when the table has no such column); InputError when the
  // row is shorter than the header.
  std::string cell(const Row& r, const std::string& name) const {
    const auto it = columns.find(name);
    if (it == columns.end()) return "";
    if (it->second >= r.cells.size()) throw InputError(source, "line " + std::to_string(r.line), "fewer cells than the header");
    return r.cells[it->second];
  }
};

inline CsvTable read_csv_table(const std::string& text, const std::string& source) {
  CsvTable t;
  t.source = source;
  std::stringstream ss(text);
  int line_no = 0;
  bool header = true;
  for (std::string line; std::getline(ss, line);) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char ch = line[i];
      if (quoted) {
        if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
        else if (ch == '"') quoted = false;
        else cells.back() += ch;
      } else if (ch == '"') {
        quoted = true;
      } else if (ch == ',') {
        cells.emplace_back();
      } else {
        cells.back() += ch;
      }
    }
    if (quoted) throw InputError(source, "line " + std::to_string(line_no), "unterminated quoted cell");
    for (auto& c : cells) {
      c.erase(0, c.find_first_not_of(" \t"));
      c.erase(c.find_last_not_of(" \t\r") + 1);
    }
    if (header) {
      for (std::size_t i = 0; i < cells.size(); ++i) {
        std::string name = cells[i];
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        t.columns[name] = i;
      }
      header = false;
      continue;
    }
    t.rows.push_back({line_no, std::move(cells)});
  }
  return t;
}

}  // namespace shardsim
