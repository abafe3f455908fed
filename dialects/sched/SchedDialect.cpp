//===- SchedDialect.cpp - the sched dialect -------------------------------===//
#include "dialects/sched/SchedDialect.h"


#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinOps.h"
#include "dialects/ParameterInit.h"

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

bool SchedDialect::isHostStream(Operation *op, uint32_t stream) {
  auto module = op->getParentOfType<ModuleOp>();
  auto streams =
      module ? module->getAttrOfType<DenseI32ArrayAttr>(kHostStreamsAttr)
             : DenseI32ArrayAttr();
  return streams &&
         llvm::is_contained(streams.asArrayRef(), static_cast<int32_t>(stream));
}

// The std is what makes a normal initialisation; the other two have none.
LogicalResult
ParamInfoAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef name, InitKind init, braid::F64 initStdBits,
                      bool weightDecay, bool checkpointTransposed,
                      FlatSymbolRefAttr grad, FlatSymbolRefAttr expAvg,
                      FlatSymbolRefAttr expAvgSq,
                      FlatSymbolRefAttr computeCopy) {
  return verifyParameterInit(emitError, name, init == InitKind::Normal,
                             stringifyInitKind(init), initStdBits);
}
