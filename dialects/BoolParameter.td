//===- BoolParameter.td - a bool as an attribute parameter ------*- tablegen -*-===//
//
// A bool parameter of an AttrDef, shared by the braid and sched dialects,
// written `true` or `false`. (The default parser of a bool would read an
// integer.)
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_BOOL_PARAMETER_TD
#define BRAID_BOOL_PARAMETER_TD

include "mlir/IR/AttrTypeBase.td"

// With a `default`, the parameter may be left out (and is not printed when
// it has that value); without one it is required.
class BoolParameter<string desc = "true or false", string default = "">
    : AttrParameter<"bool", desc> {
  let defaultValue = default;
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return true;
    if (::mlir::succeeded($_parser.parseOptionalKeyword("false")))
      return false;
    return $_parser.emitError($_parser.getCurrentLocation(),
                              "expected true or false");
  }() }];
}

#endif // BRAID_BOOL_PARAMETER_TD
