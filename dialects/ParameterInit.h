//===- ParameterInit.h - the initialisation rule of a parameter -*- C++ -*-===//
//
// A parameter's initialisation, as both dialects describe it (braid's
// #braid.param on the stage function's arguments, sched's
// #sched.param_info on its globals): a normal initialisation needs a
// finite positive std, zeros and ones take none (0). One rule, one
// wording, for both attributes' verifiers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

namespace braid {

inline mlir::LogicalResult
verifyParameterInit(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                    llvm::StringRef name, bool normal, llvm::StringRef init,
                    double initStd) {
  if (name.empty())
    return emitError() << "a parameter needs a name";
  if (normal && !(std::isfinite(initStd) && initStd > 0))
    return emitError() << "parameter '" << name
                       << "' has init = normal, so it needs a finite "
                          "positive init_std, not "
                       << initStd;
  if (!normal && initStd != 0)
    return emitError() << "parameter '" << name << "' has init = " << init
                       << ", which takes no init_std (0), not " << initStd;
  return mlir::success();
}

} // namespace braid
