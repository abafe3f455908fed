//===- SchedDialect.cpp - the sched dialect -------------------------------===//
#include "dialects/sched/SchedDialect.h"

#include <cmath>

#include "llvm/ADT/TypeSwitch.h"

#include "dialects/sched/SchedOps.h"

using namespace mlir;
using namespace braid::sched;

#include "dialects/sched/SchedDialect.cpp.inc"
#include "dialects/sched/SchedEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/sched/SchedAttrs.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/sched/SchedOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/sched/SchedAttrs.cpp.inc"
      >();
}

// The std is what makes a normal initialisation; the other two have none.
LogicalResult
ParamInfoAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef name, InitKind init, braid::F64 initStdBits,
                      bool weightDecay, bool checkpointTransposed,
                      FlatSymbolRefAttr grad, FlatSymbolRefAttr expAvg,
                      FlatSymbolRefAttr expAvgSq,
                      FlatSymbolRefAttr computeCopy) {
  const double initStd = initStdBits;
  if (name.empty())
    return emitError() << "a parameter needs a name";
  if (init == InitKind::Normal && !(std::isfinite(initStd) && initStd > 0))
    return emitError() << "parameter '" << name
                       << "' has init = normal, so it needs a finite "
                          "positive init_std, not "
                       << initStd;
  if (init != InitKind::Normal && initStd != 0)
    return emitError() << "parameter '" << name << "' has init = "
                       << stringifyInitKind(init)
                       << ", which takes no init_std";
  return success();
}
