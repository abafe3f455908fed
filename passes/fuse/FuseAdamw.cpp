//===- FuseAdamw.cpp - one multi-tensor AdamW launch ----------------------===//
//
// braid-fuse-adamw (FuseLoss.td). Works on consecutive `adamw` launches of
// @optimizer: launches in between would order reads and writes that moving
// the updates together could break. Within such a run, launches that agree
// on everything but the parameter (and on weight decay up to "none") merge
// into one `multi_adamw`, placed where the last of them was, so that every
// buffer it reads is already defined.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedDialect.h"
#include "dialects/sched/SchedOps.h"

namespace braid {
#define GEN_PASS_DEF_FUSEADAMWPASS
#include "passes/fuse/FuseLoss.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// A buffer's identity: its global when it is one, else the value.
const void *bufferKey(Value v) {
  if (auto g = v.getDefiningOp<sched::GetGlobalOp>())
    return g.getGlobalAttr().getAttr().getAsOpaquePointer();
  return v.getAsOpaquePointer();
}

bool isAdamw(sched::LaunchOp launch) {
  return launch.getKernel() == "adamw" && launch.getIns().size() == 3 &&
         launch.getOuts().size() == 3 && launch.getParams();
}

Attribute param(sched::LaunchOp launch, StringRef name) {
  return launch.getParams()->get(name);
}

bool decays(sched::LaunchOp launch) {
  auto wd = dyn_cast_or_null<FloatAttr>(param(launch, "weight_decay"));
  return wd && wd.getValueAsDouble() != 0;
}

// Launches that may share one multi_adamw: same stream, norm and skip
// buffers and hyper-parameters other than weight decay, and no extra
// parameters.
bool compatible(sched::LaunchOp a, sched::LaunchOp b) {
  if (a.getStream() != b.getStream() ||
      bufferKey(a.getIns()[1]) != bufferKey(b.getIns()[1]) ||
      bufferKey(a.getIns()[2]) != bufferKey(b.getIns()[2]))
    return false;
  DictionaryAttr pa = *a.getParams(), pb = *b.getParams();
  for (NamedAttribute p : pa)
    if (p.getName() != "weight_decay" && pb.get(p.getName()) != p.getValue())
      return false;
  return pa.size() == pb.size();
}

// Merges `group` (in launch order) into one launch when that is exact.
void merge(ArrayRef<sched::LaunchOp> group) {
  if (group.size() < 2)
    return;
  Attribute decay;
  for (sched::LaunchOp l : group) {
    if (!decays(l))
      continue;
    if (decay && decay != param(l, "weight_decay"))
      return;
    decay = param(l, "weight_decay");
  }
  // Decayed tensors first, each part in launch order.
  SmallVector<sched::LaunchOp> order;
  for (sched::LaunchOp l : group)
    if (decays(l))
      order.push_back(l);
  int64_t decayed = static_cast<int64_t>(order.size());
  for (sched::LaunchOp l : group)
    if (!decays(l))
      order.push_back(l);

  SmallVector<Value> ins, outs;
  for (sched::LaunchOp l : order)
    ins.push_back(l.getIns()[0]);
  sched::LaunchOp first = group.front(), last = group.back();
  ins.push_back(last.getIns()[1]);
  ins.push_back(last.getIns()[2]);
  for (unsigned k = 0; k < 3; ++k)
    for (sched::LaunchOp l : order)
      outs.push_back(l.getOuts()[k]);

  OpBuilder b(last);
  SmallVector<NamedAttribute> params;
  DictionaryAttr firstParams = *first.getParams();
  for (NamedAttribute p : firstParams)
    if (p.getName() != "weight_decay")
      params.push_back(p);
  params.push_back(b.getNamedAttr(
      "weight_decay", decay ? decay : b.getF64FloatAttr(0.0)));
  params.push_back(
      b.getNamedAttr("decayed", b.getI64IntegerAttr(decayed)));
  auto fused = sched::LaunchOp::create(
      b, last.getLoc(), b.getStringAttr("multi_adamw"), last.getStreamAttr(),
      last.getMicroBatchAttr(), ins, outs, b.getDictionaryAttr(params));
  copyMarks(last, fused);
  for (sched::LaunchOp l : group)
    l.erase();
}

// Splits a run of consecutive adamw launches into compatible groups.
void fuseRun(ArrayRef<sched::LaunchOp> run) {
  // A tensor updated twice in the run keeps the launches as they are.
  DenseSet<const void *> written;
  for (sched::LaunchOp l : run) {
    DenseSet<const void *> mine;
    for (Value out : l.getOuts())
      mine.insert(bufferKey(out));
    for (const void *key : mine)
      if (!written.insert(key).second)
        return;
  }
  SmallVector<SmallVector<sched::LaunchOp>> groups;
  for (sched::LaunchOp l : run) {
    auto it = llvm::find_if(groups, [&](const auto &g) {
      return compatible(g.front(), l);
    });
    if (it == groups.end())
      groups.push_back({l});
    else
      it->push_back(l);
  }
  for (const auto &g : groups)
    merge(g);
}

struct FuseAdamwPass : impl::FuseAdamwPassBase<FuseAdamwPass> {
  void runOnOperation() override {
    // AdamW launches sit at the top level of the programs (the optimizer
    // part of the step), never in a repeated micro-batch body.
    for (auto program : getOperation().getOps<sched::ProgramOp>()) {
      SmallVector<SmallVector<sched::LaunchOp>> runs(1);
      for (Operation &op : program.getBody().front()) {
        if (isa<sched::GetGlobalOp>(op))
          continue; // pure: reads no buffer
        auto launch = dyn_cast<sched::LaunchOp>(op);
        if (launch && isAdamw(launch))
          runs.back().push_back(launch);
        else if (!runs.back().empty())
          runs.emplace_back();
      }
      for (const auto &run : runs)
        fuseRun(run);
    }
  }
};

} // namespace
} // namespace braid
