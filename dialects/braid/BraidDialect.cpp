//===- BraidDialect.cpp - the braid dialect -------------------------------===//
#include "dialects/braid/BraidDialect.h"


#include "llvm/ADT/TypeSwitch.h"
#include "dialects/ParameterInit.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "dialects/braid/BraidOps.h"

using namespace mlir;
using namespace braid;

#include "dialects/braid/BraidDialect.cpp.inc"
#include "dialects/braid/BraidEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/braid/BraidAttrs.cpp.inc"

void BraidDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/braid/BraidOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/braid/BraidAttrs.cpp.inc"
      >();
}

// The marks and the module's settings must have their types; the module's
// other braid.* attributes (name, memory figures) are checked by the passes
// that read them. What an argument is belongs on the argument.
LogicalResult BraidDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto wrongType = [&](StringRef expected) {
    return op->emitOpError() << "'" << name << "' must be a " << expected
                             << ", not " << value;
  };
  if (name == kParamAttr || name == kInputAttr)
    return op->emitOpError()
           << "'" << name << "' belongs on a function argument, not on an op";
  if (name == kLayerMark && !isa<LayerAttr>(value))
    return wrongType("#braid.layer");
  if (name == kPhaseMark && !isa<PhaseAttr>(value))
    return wrongType("#braid.phase");
  if (name == kMoeBlockMark && !isa<UnitAttr>(value))
    return wrongType("unit attribute");
  if (name == kTpAttr) {
    auto layouts = dyn_cast<ArrayAttr>(value);
    if (!layouts || layouts.size() != op->getNumResults() ||
        !llvm::all_of(layouts, [](Attribute a) { return isa<TpLayoutAttr>(a); }))
      return wrongType("array of one #braid.tp<...> per result");
  }
  if (name == kBucketMbAttr) {
    auto mb = dyn_cast<FloatAttr>(value);
    if (!isa<ModuleOp>(op))
      return op->emitOpError()
             << "'" << name << "' belongs on the module, not on an op";
    if (!mb || !mb.getType().isF64() || !(mb.getValueAsDouble() >= 0))
      return wrongType("non-negative f64");
  }
  if (name == kPipelineAttr || name == kPartitionAttr ||
      name == kScheduleAttr) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError()
             << "'" << name << "' belongs on the module, not on an op";
    if (name == kPartitionAttr ? !isa<ArrayAttr>(value)
                               : !isa<DictionaryAttr>(value))
      return wrongType(name == kPartitionAttr ? "array" : "dictionary");
  }
  if (name == kCpAllGatherAttr && (!isa<ModuleOp>(op) || !isa<UnitAttr>(value)))
    return op->emitOpError()
           << "'" << name << "' is a unit attribute on the module";
  if (name == kPipelineRankAttr &&
      (!isa<ModuleOp>(op) || !isa<IntegerAttr>(value)))
    return op->emitOpError()
           << "'" << name << "' is an integer on a nested module";
  if (name == kModelAttr || name == kTrainAttr || name == kMeshAttr) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError()
             << "'" << name << "' belongs on the module, not on an op";
    if (name == kModelAttr && !isa<ModelAttr>(value))
      return wrongType("#braid.model<...>");
    if (name == kTrainAttr && !isa<TrainAttr>(value))
      return wrongType("#braid.train<...>");
    if (name == kMeshAttr && !isa<MeshAttr>(value))
      return wrongType("#braid.mesh<...>");
  }
  if (name == kStageAttr) {
    auto stage = dyn_cast<StageAttr>(value);
    if (!stage)
      return wrongType("#braid.stage");
    if (!isa<func::FuncOp>(op))
      return op->emitOpError()
             << "'" << name << "' marks a func.func, not this op";
    // One function per stage: the later of two claimants is refused.
    for (Operation &other : op->getBlock()->getOperations()) {
      if (&other == op)
        break;
      if (other.getAttr(kStageAttr) == stage)
        return op->emitOpError()
               << "is stage " << stage.getIndex() << " like @"
               << cast<func::FuncOp>(other).getSymName()
               << "; a stage has one function";
    }
  }
  return success();
}

// An argument of a stage function is a parameter or an input, and the
// passes read which through the attribute's type.
LogicalResult BraidDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto wrongType = [&](StringRef expected) {
    return op->emitOpError() << "'" << name << "' of argument " << argIndex
                             << " must be a " << expected << ", not " << value;
  };
  if (name == kParamAttr && !isa<ParamAttr>(value))
    return wrongType("#braid.param<...>");
  if (name == kTpAttr && !isa<TpLayoutAttr>(value))
    return wrongType("#braid.tp<...>");
  if (name == kExpertShardAttr && !isa<UnitAttr>(value))
    return wrongType("unit attribute");
  if (name == kInputAttr) {
    if (!isa<InputRoleAttr>(value))
      return wrongType("#braid.input");
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (function && regionIndex == 0 &&
        function.getArgAttr(argIndex, kParamAttr))
      return op->emitOpError() << "argument " << argIndex
                               << " is both a braid.param and a braid.input";
  }
  return success();
}

// braid-autodiff tags each gradient it returns with the name of its
// parameter.
LogicalResult BraidDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  if (attr.getName() != kGradOfAttr)
    return success();
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name)
    return op->emitOpError()
           << "'" << kGradOfAttr << "' of result " << resultIndex
           << " must be a parameter's name, not " << attr.getValue();
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || regionIndex != 0)
    return success();
  for (unsigned i = 0, e = function.getNumArguments(); i != e; ++i)
    if (auto param = function.getArgAttrOfType<ParamAttr>(i, kParamAttr);
        param && param.getName() == name.getValue())
      return success();
  return op->emitOpError() << "'" << kGradOfAttr << "' of result "
                           << resultIndex << " is " << name
                           << ", but no braid.param argument has that name";
}

Attribute LayerAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SMLoc loc = parser.getCurrentLocation();
  int64_t index = 0;
  if (succeeded(parser.parseOptionalKeyword("embedding")))
    index = kEmbedding;
  else if (succeeded(parser.parseOptionalKeyword("loss")))
    index = kLoss;
  else if (parser.parseInteger(index))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), index);
}

void LayerAttr::print(AsmPrinter &printer) const {
  printer << '<';
  if (isEmbedding())
    printer << "embedding";
  else if (isLoss())
    printer << "loss";
  else
    printer << getIndex();
  printer << '>';
}

LogicalResult
LayerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                  int64_t index) {
  if (index < kLoss)
    return emitError() << "a layer is 'embedding', 'loss' or an index of "
                          "0 or more, not "
                       << index;
  return success();
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t tp, int64_t cp, int64_t pp,
                               int64_t dp, int64_t ep) {
  for (int64_t size : {tp, cp, pp, dp})
    if (size < 1)
      return emitError() << "every mesh axis has at least one rank, not "
                         << size;
  if (ep < 1 || dp % ep != 0)
    return emitError() << "ep = " << ep << " does not divide dp = " << dp
                       << ": expert-parallel groups split the DP ranks";
  return success();
}

LogicalResult TpLayoutAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, TpKind kind, int64_t dim,
    int64_t blocks) {
  if (kind == TpKind::Split ? dim < 0 || blocks < 1 : dim != 0 || blocks != 1)
    return emitError() << "a split layout has a dimension of 0 or more and "
                          "1 or more blocks; the others have dim = 0 and "
                          "blocks = 1";
  return success();
}

LogicalResult StageAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t index) {
  if (index < 0)
    return emitError() << "a stage is numbered from 0, not " << index;
  return success();
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, InitKind init, F64 initStdBits,
                                bool weightDecay, bool checkpointTransposed) {
  return verifyParameterInit(emitError, name, init == InitKind::Normal,
                             stringifyInitKind(init), initStdBits);
}
