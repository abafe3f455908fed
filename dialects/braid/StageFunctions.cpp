//===- StageFunctions.cpp - the functions that hold pipeline stages -------===//
#include "dialects/braid/StageFunctions.h"

#include "llvm/ADT/STLExtras.h"

#include "dialects/braid/BraidDialect.h"

using namespace mlir;

namespace braid {

FailureOr<SmallVector<func::FuncOp>> stageFunctions(ModuleOp module,
                                                    StringRef pass) {
  SmallVector<std::pair<int64_t, func::FuncOp>> stages;
  for (auto func : module.getOps<func::FuncOp>())
    if (auto stage = func->getAttrOfType<StageAttr>(BraidDialect::kStageAttr))
      stages.push_back({stage.getIndex(), func});
  if (stages.empty())
    return module.emitError()
           << pass
           << " needs a stage function, a func.func marked braid.stage "
              "(braid-import marks the one it creates #braid.stage<0>)";
  llvm::stable_sort(stages, llvm::less_first());
  return llvm::to_vector(llvm::make_second_range(stages));
}

FailureOr<func::FuncOp> singleStageFunction(ModuleOp module, StringRef pass) {
  FailureOr<SmallVector<func::FuncOp>> funcs = stageFunctions(module, pass);
  if (failed(funcs))
    return failure();
  if (funcs->size() > 1) {
    InFlightDiagnostic diag = module.emitError()
                              << pass << " handles one pipeline stage, but "
                              << funcs->size() << " functions are stages:";
    for (func::FuncOp f : *funcs)
      diag << " @" << f.getSymName();
    return diag;
  }
  return funcs->front();
}

} // namespace braid
