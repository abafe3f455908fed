//===- FusionSet.cpp - which fusions a compilation applies ----------------===//
#include "passes/fuse/FusionSet.h"

#include <optional>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassRegistry.h"

#include "compiler/spec/FusionList.h"
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
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/fuse/FuseMoe.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {

ArrayRef<Fusion> allFusions() {
  // The names and their order are the spec's (compiler/spec/FusionList.h);
  // the pass of NAME is braid-fuse-NAME, and only AdamW's works on the
  // sched programs.
  static const std::vector<Fusion> kFusions = [] {
    static std::vector<std::string> passes;
    passes.reserve(fusionNames().size());
    std::vector<Fusion> out;
    for (const std::string &name : fusionNames()) {
      passes.push_back("braid-fuse-" + name);
      out.push_back({name, passes.back(),
                     name == "adamw" ? FusionStage::kSched
                                     : FusionStage::kGraph});
    }
    return out;
  }();
  return kFusions;
}

FailureOr<SmallVector<const Fusion *>>
parseFusionList(StringRef text, std::string &error) {
  absl::StatusOr<std::vector<std::string>> names =
      parseFusionNames(std::string_view(text.data(), text.size()));
  if (!names.ok()) {
    error = std::string(names.status().message());
    return failure();
  }
  SmallVector<const Fusion *> out;
  for (const std::string &name : *names)
    for (const Fusion &f : allFusions())
      if (f.name == name)
        out.push_back(&f);
  return out;
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
  registerFuseMoePasses();
}

} // namespace braid
