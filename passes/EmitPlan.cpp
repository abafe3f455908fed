//===- EmitPlan.cpp - the braid-emit-plan pass ----------------------------===//
#include "passes/Passes.h"

#include <string>

#include "llvm/Support/raw_ostream.h"

#include "compiler/emit/PlanEmitter.h"
#include "runtime/io/AtomicFile.h"

namespace braid {
#define GEN_PASS_DEF_EMITPLANPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

struct EmitPlanPass : impl::EmitPlanPassBase<EmitPlanPass> {
  using EmitPlanPassBase::EmitPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (format != "binary" && format != "text") {
      module.emitError() << "braid-emit-plan: unknown format '" << format
                         << "'; use binary or text";
      return signalPassFailure();
    }
    FailureOr<plan::Plan> plan = emitPlan(module);
    if (failed(plan))
      return signalPassFailure();
    const std::string bytes = planFileBytes(*plan, format == "text");
    if (output == "-") {
      llvm::outs() << bytes;
      return;
    }
    absl::Status written = writeFileAtomically(output, bytes);
    if (!written.ok()) {
      module.emitError() << "braid-emit-plan: "
                         << std::string(written.message());
      return signalPassFailure();
    }
  }
};

} // namespace
} // namespace braid
