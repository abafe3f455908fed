//===- PlanMemory.cpp - static arena offsets from liveness ----------------===//
//
// The arena the runtime allocates is exactly what this pass computes, so the
// peak reported here is the peak the run will use. Transient placement is
// greedy: largest buffer first, at the lowest 64-byte-aligned offset where it
// collides with no already-placed buffer whose live range overlaps its own.
// Every buffer counts at its element type's size, so a BF16 plan's bf16
// activations and weight copies take half the bytes of their f32 twins.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include <algorithm>
#include <numeric>

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Builders.h"

#include "dialects/sched/SchedOps.h"
#include "passes/analysis/Liveness.h"

namespace braid {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t v) {
  return (v + kAlignment - 1) / kAlignment * kAlignment;
}

struct MemoryTotals {
  int64_t parameter = 0, gradient = 0, optimizer = 0, weightCopy = 0;
  int64_t input = 0;
  int64_t activationPeak = 0, savedActivations = 0, arena = 0;
};

// Lays out the persistent globals kind by kind; returns the end offset.
int64_t placeGlobals(ModuleOp module, MemoryTotals &totals) {
  int64_t offset = 0;
  OpBuilder b(module.getContext());
  for (StringRef kind : {"parameter", "gradient", "optimizer_state",
                         "weight_copy", "input", "scalar"}) {
    for (auto global : module.getOps<sched::GlobalOp>()) {
      if (global.getKind() != kind)
        continue;
      int64_t bytes = bufferBytes(global.getType());
      global.setOffsetAttr(b.getI64IntegerAttr(offset));
      offset += alignUp(bytes);
      if (kind == "parameter")
        totals.parameter += bytes;
      else if (kind == "gradient")
        totals.gradient += bytes;
      else if (kind == "optimizer_state")
        totals.optimizer += bytes;
      else if (kind == "weight_copy")
        totals.weightCopy += bytes;
      else
        totals.input += bytes;
    }
  }
  return offset;
}

// Places one program's transient buffers in the transient region that
// starts at `base`; returns the region size the program needs.
int64_t placeTransients(std::vector<LiveRange> &ranges, int64_t base) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].bytes != ranges[b].bytes)
      return ranges[a].bytes > ranges[b].bytes;
    return ranges[a].begin < ranges[b].begin;
  });

  std::vector<int64_t> offsets(ranges.size(), -1);
  std::vector<size_t> placed;
  int64_t peak = 0;
  for (size_t i : order) {
    // Occupied intervals of placed buffers alive at the same time.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (ranges[i].overlaps(ranges[j]))
        busy.push_back({offsets[j], offsets[j] + alignUp(ranges[j].bytes)});
    std::sort(busy.begin(), busy.end());
    int64_t candidate = 0, size = alignUp(ranges[i].bytes);
    for (auto [lo, hi] : busy) {
      if (candidate + size <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    offsets[i] = candidate;
    placed.push_back(i);
    peak = std::max(peak, candidate + size);
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    OpBuilder b(ranges[i].alloc);
    ranges[i].alloc.setOffsetAttr(b.getI64IntegerAttr(base + offsets[i]));
  }
  return peak;
}

// Bytes live across the forward/backward boundary: what the forward pass
// saves for the backward pass.
int64_t savedAcrossBoundary(const std::vector<LiveRange> &ranges,
                            const std::vector<sched::LaunchOp> &launches) {
  int64_t boundary = -1;
  for (size_t i = 0; i < launches.size(); ++i) {
    sched::LaunchOp launch = launches[i];
    StringRef k = launch.getKernel();
    if (k.ends_with("_grad_input") || k.ends_with("_grad_weight")) {
      boundary = static_cast<int64_t>(i);
      break;
    }
  }
  if (boundary < 0)
    return 0;
  int64_t saved = 0;
  for (const LiveRange &r : ranges)
    if (r.begin < boundary && r.end >= boundary)
      saved += r.bytes;
  return saved;
}

std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f %s", v, units[u]);
  return s;
}

// Every offset the planner computes is at most the sum of all buffer sizes,
// so bounding that sum once makes all later int64 arithmetic safe.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 62;

LogicalResult checkAddressable(ModuleOp module) {
  __int128 total = 0;
  auto add = [&](Operation *op, MemRefType type) -> LogicalResult {
    int64_t bytes = bufferBytes(type);
    if (bytes < 0 || bytes > kMaxArenaBytes)
      return op->emitOpError("buffer of ")
             << type << " is larger than the 2^62 bytes an arena can address";
    total += alignUp(bytes);
    return success();
  };
  for (auto global : module.getOps<sched::GlobalOp>())
    if (failed(add(global, global.getType())))
      return failure();
  WalkResult r = module.walk([&](sched::AllocOp alloc) {
    return failed(add(alloc, alloc.getType())) ? WalkResult::interrupt()
                                               : WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (total > kMaxArenaBytes)
    return module.emitError(
        "the buffers of this plan add up to more than 2^62 bytes, which the "
        "arena cannot address; reduce seq_len, micro_batch_size, num_layers "
        "or the model's sizes");
  return success();
}

struct PlanMemoryPass : impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkAddressable(module)))
      return signalPassFailure();
    MemoryTotals totals;
    int64_t transientBase = alignUp(placeGlobals(module, totals));

    for (auto program : module.getOps<sched::ProgramOp>()) {
      std::vector<sched::LaunchOp> launches;
      std::vector<LiveRange> ranges = computeLiveRanges(program, &launches);
      numTransient += ranges.size();
      int64_t peak = placeTransients(ranges, transientBase);
      totals.activationPeak = std::max(totals.activationPeak, peak);
      if (program.getSymName() == "micro_batch")
        totals.savedActivations = savedAcrossBoundary(ranges, launches);
    }
    totals.arena = transientBase + totals.activationPeak;

    OpBuilder b(module.getContext());
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    SmallVector<NamedAttribute> memory = {
        b.getNamedAttr("parameter_bytes", i64(totals.parameter)),
        b.getNamedAttr("gradient_bytes", i64(totals.gradient)),
        b.getNamedAttr("optimizer_bytes", i64(totals.optimizer)),
        b.getNamedAttr("input_bytes", i64(totals.input)),
        b.getNamedAttr("activation_peak_bytes", i64(totals.activationPeak)),
        b.getNamedAttr("saved_activation_bytes", i64(totals.savedActivations)),
        b.getNamedAttr("arena_bytes", i64(totals.arena))};
    // Only plans with weight copies (BF16) carry the entry, so FP32 modules
    // read as they always did.
    if (totals.weightCopy > 0)
      memory.push_back(
          b.getNamedAttr("weight_copy_bytes", i64(totals.weightCopy)));
    module->setAttr("sched.memory", b.getDictionaryAttr(memory));

    if (report) {
      auto &os = llvm::errs();
      os << "memory report (rank 0)\n";
      auto line = [&](StringRef what, int64_t bytes) {
        os << llvm::format("  %-22s %14lld bytes  %12s\n", what.str().c_str(),
                           static_cast<long long>(bytes),
                           humanBytes(bytes).c_str());
      };
      line("parameters", totals.parameter);
      line("gradients", totals.gradient);
      line("optimizer state", totals.optimizer);
      if (totals.weightCopy > 0)
        line("weight copies", totals.weightCopy);
      line("inputs and scalars", totals.input);
      line("activations (peak)", totals.activationPeak);
      line("  saved for backward", totals.savedActivations);
      line("arena", totals.arena);
    }
  }
};

} // namespace
} // namespace braid
