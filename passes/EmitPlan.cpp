//===- EmitPlan.cpp - the braid-emit-plan pass ----------------------------===//
#include "passes/Passes.h"

#include <string>

#include "google/protobuf/text_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "compiler/emit/PlanEmitter.h"

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
    std::string bytes;
    bool ok = format == "text"
                  ? google::protobuf::TextFormat::PrintToString(*plan, &bytes)
                  : plan->SerializeToString(&bytes);
    if (!ok) {
      module.emitError("braid-emit-plan: could not serialise the plan");
      return signalPassFailure();
    }
    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec, llvm::sys::fs::OF_None);
    if (ec) {
      module.emitError() << "braid-emit-plan: cannot write '" << output
                         << "': " << ec.message();
      return signalPassFailure();
    }
    os << bytes;
  }
};

} // namespace
} // namespace braid
