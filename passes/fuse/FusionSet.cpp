//===- FusionSet.cpp - which fusions a compilation applies ----------------===//
#include "passes/fuse/FusionSet.h"

#include <optional>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassRegistry.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace braid {
// The declarations (create*Pass) that the registrations call.
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/fuse/FuseAttention.h.inc"
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/fuse/FuseElementwise.h.inc"
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/fuse/FuseLoss.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {

ArrayRef<Fusion> allFusions() {
  // Attention first: the GQA rewrite feeds flash attention, and RoPE in
  // the QKV epilogue must see the projections before the norm and
  // activation fusions rename their neighbours.
  static const Fusion kFusions[] = {
      {"gqa", "braid-fuse-gqa", FusionStage::kGraph},
      {"flash-attention", "braid-fuse-flash-attention", FusionStage::kGraph},
      {"rope-qkv", "braid-fuse-rope-qkv", FusionStage::kGraph},
      {"add-norm", "braid-fuse-add-norm", FusionStage::kGraph},
      {"bias-gelu", "braid-fuse-bias-gelu", FusionStage::kGraph},
      {"bias-swiglu", "braid-fuse-bias-swiglu", FusionStage::kGraph},
      {"bias-dropout-add", "braid-fuse-bias-dropout-add", FusionStage::kGraph},
      {"linear-cross-entropy", "braid-fuse-linear-cross-entropy",
       FusionStage::kGraph},
      {"adamw", "braid-fuse-adamw", FusionStage::kSched},
  };
  return kFusions;
}

FailureOr<SmallVector<const Fusion *>>
parseFusionList(StringRef text, std::string &error) {
  SmallVector<StringRef> valid;
  for (const Fusion &f : allFusions())
    valid.push_back(f.name);
  const std::string expected =
      "expected all, none, or a comma-separated list of: " +
      llvm::join(valid, ", ");
  SmallVector<const Fusion *> out;
  text = text.trim();
  if (text.empty()) {
    error = "the fusion list is empty; write none for no fusion, or all; " +
            expected;
    return failure();
  }
  if (text == "none")
    return out;
  SmallVector<StringRef> names;
  text.split(names, ',');
  llvm::SmallDenseSet<const Fusion *> chosen;
  for (StringRef raw : names) {
    StringRef name = raw.trim();
    // "all" may be written beside names (they are in it anyway); "none"
    // beside names contradicts them.
    if (name == "all") {
      for (const Fusion &f : allFusions())
        chosen.insert(&f);
      continue;
    }
    if (name == "none") {
      error = ("the fusion list '" + text +
               "' combines none with fusions; write none alone for no "
               "fusion")
                  .str();
      return failure();
    }
    const Fusion *match = nullptr;
    for (const Fusion &f : allFusions())
      if (f.name == name)
        match = &f;
    if (!match) {
      error = name.empty()
                  ? ("the fusion list '" + text + "' has an empty entry; " +
                     expected)
                        .str()
                  : ("unknown fusion '" + name + "'; " + expected).str();
      return failure();
    }
    chosen.insert(match);
  }
  for (const Fusion &f : allFusions())
    if (chosen.contains(&f))
      out.push_back(&f);
  return out;
}

bool namesEveryFusion(StringRef text) {
  SmallVector<StringRef> names;
  text.split(names, ',');
  return llvm::any_of(names, [](StringRef n) { return n.trim() == "all"; });
}

namespace {

// Compares each fusion pass's module before and after it.
class FusionWatch : public PassInstrumentation {
public:
  explicit FusionWatch(std::shared_ptr<FusionOutcome> outcome)
      : outcome_(std::move(outcome)) {}

  void runBeforePass(Pass *pass, Operation *op) override {
    if (fusionOf(pass))
      before_.emplace(op);
  }
  void runAfterPass(Pass *pass, Operation *op) override {
    const Fusion *f = fusionOf(pass);
    if (!f || !before_)
      return;
    if (*before_ == OperationFingerPrint(op))
      outcome_->unchanged.push_back(f);
    before_.reset();
  }

private:
  static const Fusion *fusionOf(Pass *pass) {
    for (const Fusion &f : allFusions())
      if (pass->getArgument() == f.pass)
        return &f;
    return nullptr;
  }

  std::shared_ptr<FusionOutcome> outcome_;
  std::optional<OperationFingerPrint> before_;
};

} // namespace

void watchFusions(PassManager &pm, std::shared_ptr<FusionOutcome> outcome) {
  pm.addInstrumentation(std::make_unique<FusionWatch>(std::move(outcome)));
}

LogicalResult addFusionPasses(OpPassManager &pm,
                              ArrayRef<const Fusion *> fusions,
                              FusionStage stage, std::string &error) {
  // Tools that build the pipeline without registering every pass (braidc)
  // find the fusion passes too. Registering a pass again is a no-op.
  static const bool registered = (registerFusionPasses(), true);
  (void)registered;
  for (const Fusion *f : fusions) {
    if (f->stage != stage)
      continue;
    const PassInfo *info = PassInfo::lookup(f->pass);
    if (!info) {
      error = ("fusion '" + f->name + "' (pass " + f->pass +
               ") is not part of this build")
                  .str();
      return failure();
    }
    if (failed(info->addToPipeline(pm, "", [&](const Twine &msg) {
          error = msg.str();
          return failure();
        })))
      return failure();
  }
  return success();
}

void registerFusionPasses() {
  registerFuseAttentionPasses();
  registerFuseElementwisePasses();
  registerFuseLossPasses();
}

} // namespace braid
