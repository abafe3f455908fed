// Printable names of plan enums, for messages and reports.
#include "runtime/plan/PlanLoader.h"

namespace braid {

const char *planDTypeName(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return "f32";
  case plan::BF16:
    return "bf16";
  case plan::I32:
    return "i32";
  default:
    return "unspecified";
  }
}

const char *tensorKindName(plan::TensorKind kind) {
  switch (kind) {
  case plan::PARAMETER:
    return "PARAMETER";
  case plan::GRADIENT:
    return "GRADIENT";
  case plan::OPTIMIZER_STATE:
    return "OPTIMIZER_STATE";
  case plan::INPUT:
    return "INPUT";
  case plan::ACTIVATION:
    return "ACTIVATION";
  case plan::SCALAR:
    return "SCALAR";
  case plan::WEIGHT_COPY:
    return "WEIGHT_COPY";
  default:
    return "UNSPECIFIED";
  }
}

} // namespace braid
