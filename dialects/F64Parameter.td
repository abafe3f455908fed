//===- F64Parameter.td - a double as an attribute parameter -----*- tablegen -*-===//
//
// An f64 parameter of an AttrDef, shared by the braid and sched dialects.
// It is stored as a braid::F64 (F64Parameter.h), read as a double, and
// printed as an f64 FloatAttr is, which parses back to the same double.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_F64_PARAMETER_TD
#define BRAID_F64_PARAMETER_TD

include "mlir/IR/AttrTypeBase.td"

// With a `default`, the parameter may be left out (and is not printed when
// it has that value); without one it is required.
class F64Parameter<string desc = "an f64 value", string default = "">
    : AttrParameter<"::braid::F64", desc, "double"> {
  let defaultValue = default;
  let parser = [{ [&]() -> ::mlir::FailureOr<::braid::F64> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::braid::F64(value);
  }() }];
}

#endif // BRAID_F64_PARAMETER_TD
