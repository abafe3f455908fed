//===- BraidDialect.cpp - the braid dialect -------------------------------===//
#include "dialects/braid/BraidDialect.h"

#include "llvm/ADT/TypeSwitch.h"

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

// The marks must have their types; the module's other braid.* attributes
// (name, model, training settings, memory figures) are checked by the
// passes that read them.
LogicalResult BraidDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() == kLayerMark && !isa<LayerAttr>(attr.getValue()))
    return op->emitOpError() << "'" << kLayerMark
                             << "' must be a #braid.layer, not "
                             << attr.getValue();
  if (attr.getName() == kPhaseMark && !isa<PhaseAttr>(attr.getValue()))
    return op->emitOpError() << "'" << kPhaseMark
                             << "' must be a #braid.phase, not "
                             << attr.getValue();
  return success();
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
