// sim/simgrid/wire.cpp — see wire.hpp. Field order of each message is the order of the struct's fields;
// change a message's layout only together with its version number.
#include "sim/simgrid/wire.hpp"

#include <cassert>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <limits>

namespace shardsim {

namespace {

constexpr std::uint32_t kProgramVersion = 6;  // 4: all-to-all matrices sparse; 5: compute share; 6: all-reduce kernels
constexpr std::uint32_t kTimingVersion = 2;  // 2: compute work (tensor, HBM)
constexpr std::uint32_t kTimelineVersion = 1;
// Encoded size of one StepOp: see the field list in encode(StepProgram).
constexpr std::size_t kEntryBytes = 4 + 4 + 8;  // one all-to-all matrix entry
constexpr std::size_t kOpBytes = 2 + 3 * 4 + 2 * 8 + 1 + 1 + 8 + 4 + 2 + 8 + 2 * 4 + 8 + 2 * 4;

// Reads an enum stored as u8 and refuses values at or past `count`.
template <typename E>
E read_enum(WireReader& r, int count, const char* what) {
  const std::uint8_t v = r.u8();
  if (v >= count) throw WireError(std::string("wire: ") + what + " value " + std::to_string(v) + " out of range");
  return static_cast<E>(v);
}

// Refuses an index that is neither -1 (none) nor inside [0, size).
void check_index(int index, std::size_t size, const char* what) {
  if (index < -1 || (index >= 0 && static_cast<std::size_t>(index) >= size))
    throw WireError(std::string("wire: ") + what + " index " + std::to_string(index) + " out of range (size " +
                    std::to_string(size) + ")");
}

template <std::size_t N>
void write_array(WireWriter& w, const std::array<double, N>& a) {
  for (double v : a) w.f64(v);
}

template <std::size_t N>
void read_array(WireReader& r, std::array<double, N>& a) {
  for (double& v : a) v = r.f64();
}

// An all-to-all matrix: its members, then its entries, in ascending (from, to) order inside it.
A2aMatrix read_matrix(WireReader& r) {
  A2aMatrix m(r.u32());
  const std::uint32_t n = r.count(kEntryBytes);
  m.reserve(n);
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t from = r.u32(), to = r.u32();
    const double bytes = r.f64();
    if (!m.fits(from, to))
      throw WireError("wire: all-to-all entry (" + std::to_string(from) + ", " + std::to_string(to) +
                      ") out of order or outside its " + std::to_string(m.members()) + " members");
    m.push(from, to, bytes);
  }
  return m;
}

}  // namespace

// --- StepProgram ------------------------------------------------------------------------

std::string encode(const StepProgram& p) {
  // The exact size, so the buffer is allocated once.
  // header, rank_gpu, the three counts of groups / a2a / ops, the ops, deps, compute share, all-reduce kernels
  std::size_t size = 8 + (4 + 4 * p.rank_gpu.size()) + 3 * 4 + kOpBytes * p.ops.size() + (4 + 4 * p.deps.size()) + 8 + 1;
  for (const auto& g : p.groups) size += 4 + 4 * g.size();
  for (const auto& m : p.a2a) size += 8 + kEntryBytes * m.entries().size();
  WireWriter w;
  w.bytes().reserve(size);
  w.header("SPRG", kProgramVersion);
  w.ints(p.rank_gpu);
  w.count(p.groups.size());
  for (const auto& g : p.groups) w.ints(g);
  w.u32(static_cast<std::uint32_t>(p.a2a.size()));
  for (const auto& m : p.a2a) {  // members, then each entry (from, to, bytes) in order
    w.count(m.members());
    w.count(m.entries().size());
    for (const A2aMatrix::Entry& e : m.entries()) {
      w.u32(e.from);
      w.u32(e.to);
      w.f64(e.bytes);
    }
  }
  w.count(p.ops.size());
  for (const StepOp& op : p.ops) {
    if (op.analytic_only())
      throw std::logic_error("encode: a folded step program (operation weight " + std::to_string(op.weight) +
                             ", or one kernel for a TP group) is analytic only; lower SimGrid programs unfolded");
    w.u8(static_cast<std::uint8_t>(op.type));
    w.u8(static_cast<std::uint8_t>(op.cls));
    w.i32(op.layer);
    w.i32(op.stage);
    w.i32(op.rank);
    w.f64(op.flops);
    w.f64(op.hbm_bytes);
    w.u8(static_cast<std::uint8_t>(op.math));
    w.u8(static_cast<std::uint8_t>(op.kernel));
    w.f64(op.rows);
    w.i32(op.group);
    w.u8(static_cast<std::uint8_t>(op.coll));
    w.u8(static_cast<std::uint8_t>(op.algo));
    w.f64(op.bytes);
    w.i32(op.matrix);
    w.i32(op.peer);
    w.f64(op.not_before);
    w.u32(op.dep_begin);
    w.u32(op.dep_end);
  }
  w.ints(p.deps);
  w.f64(p.compute_share);
  w.u8(static_cast<std::uint8_t>(p.allreduce));
  assert(w.bytes().size() == size && "kOpBytes must match the fields written per op");
  return w.take();
}

StepProgram decode_program(std::string_view bytes) {
  WireReader r(bytes);
  r.header("SPRG", kProgramVersion);
  StepProgram p;
  p.rank_gpu = r.ints();
  p.groups.resize(r.count(4));  // each group holds at least its count
  for (auto& g : p.groups) g = r.ints();
  p.a2a.resize(r.count(4));
  for (auto& m : p.a2a) m = read_matrix(r);
  p.ops.resize(r.count(kOpBytes));
  for (StepOp& op : p.ops) {
    op.type = read_enum<OpType>(r, 3, "op type");
    op.cls = read_enum<OpClass>(r, kNumOpClasses, "op class");
    op.layer = r.i32();
    op.stage = r.i32();
    op.rank = r.i32();
    op.flops = r.f64();
    op.hbm_bytes = r.f64();
    op.math = read_enum<Dtype>(r, 4, "dtype");
    op.kernel = read_enum<ComputeKind>(r, 6, "kernel kind");
    op.rows = r.f64();
    op.group = r.i32();
    op.coll = read_enum<CollKind>(r, 4, "collective kind");
    op.algo = read_enum<CollAlgo>(r, 8, "collective algorithm");
    op.bytes = r.f64();
    op.matrix = r.i32();
    op.peer = r.i32();
    op.not_before = r.f64();
    if (!(op.not_before >= 0) || !std::isfinite(op.not_before)) throw WireError("wire: operation release time " + std::to_string(op.not_before));
    op.dep_begin = r.u32();
    op.dep_end = r.u32();
  }
  p.deps = r.ints();
  p.compute_share = r.f64();
  if (!(p.compute_share > 0 && p.compute_share <= 1)) throw WireError("wire: compute share " + std::to_string(p.compute_share));
  p.allreduce = read_enum<AllReduceKernels>(r, 4, "all-reduce kernels");
  r.finish();
  // Indices must stay inside the program, so that an executor can follow them blindly.
  for (const StepOp& op : p.ops) {
    if (op.dep_begin > op.dep_end || op.dep_end > p.deps.size())
      throw WireError("wire: dependency range [" + std::to_string(op.dep_begin) + ", " + std::to_string(op.dep_end) +
                      ") outside the " + std::to_string(p.deps.size()) + " dependencies");
    check_index(op.group, p.groups.size(), "collective group");
    check_index(op.matrix, p.a2a.size(), "all-to-all matrix");
  }
  return p;
}

// --- StepTiming -------------------------------------------------------------------------

std::string encode(const StepTiming& t) {
  WireWriter w;
  w.header("STIM", kTimingVersion);
  w.f64(t.makespan);
  w.doubles(t.stage_time);
  write_array(w, t.critical);
  write_array(w, t.busy);
  w.f64(t.comm_busy);
  w.f64(t.comm_exposed);
  w.f64(t.expert_imbalance);
  w.f64(t.expert_time);
  write_array(w, t.coll_by_kind);
  w.f64(t.idle_on_path);
  w.f64(t.tensor_work);
  w.f64(t.hbm_work);
  return w.take();
}

StepTiming decode_timing(std::string_view bytes) {
  WireReader r(bytes);
  r.header("STIM", kTimingVersion);
  StepTiming t;
  t.makespan = r.f64();
  t.stage_time = r.doubles();
  read_array(r, t.critical);
  read_array(r, t.busy);
  t.comm_busy = r.f64();
  t.comm_exposed = r.f64();
  t.expert_imbalance = r.f64();
  t.expert_time = r.f64();
  read_array(r, t.coll_by_kind);
  t.idle_on_path = r.f64();
  t.tensor_work = r.f64();
  t.hbm_work = r.f64();
  r.finish();
  return t;
}

// --- Timeline ---------------------------------------------------------------------------

std::string encode(const std::vector<TimelineEvent>& timeline) {
  WireWriter w;
  w.header("STLN", kTimelineVersion);
  w.count(timeline.size());
  for (const TimelineEvent& e : timeline) {
    w.i32(e.rank);
    w.u8(static_cast<std::uint8_t>(e.stream));
    w.u8(static_cast<std::uint8_t>(e.cls));
    w.i32(e.layer);
    w.f64(e.start);
    w.f64(e.duration);
    w.string(e.name);
  }
  return w.take();
}

std::vector<TimelineEvent> decode_timeline(std::string_view bytes) {
  WireReader r(bytes);
  r.header("STLN", kTimelineVersion);
  std::vector<TimelineEvent> timeline(r.count(4 + 1 + 1 + 4 + 8 + 8 + 4));
  for (TimelineEvent& e : timeline) {
    e.rank = r.i32();
    e.stream = read_enum<Stream>(r, 2, "stream");
    e.cls = read_enum<OpClass>(r, kNumOpClasses, "op class");
    e.layer = r.i32();
    e.start = r.f64();
    e.duration = r.f64();
    e.name = r.string();
  }
  r.finish();
  return timeline;
}

}  // namespace shardsim
