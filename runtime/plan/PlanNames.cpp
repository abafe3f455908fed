// Printable names of plan enums, for messages and reports: protobuf's own
// names, with a word for values outside the enum.
#include "runtime/plan/PlanLoader.h"

#include "absl/strings/ascii.h"

namespace braid {
namespace {

std::string orUnspecified(const std::string &name, bool specified) {
  return specified && !name.empty() ? name : "UNSPECIFIED";
}

} // namespace

std::string planDTypeName(plan::DType dtype) {
  return absl::AsciiStrToLower(orUnspecified(
      plan::DType_Name(dtype), dtype != plan::DTYPE_UNSPECIFIED));
}

std::string tensorKindName(plan::TensorKind kind) {
  return orUnspecified(plan::TensorKind_Name(kind),
                       kind != plan::KIND_UNSPECIFIED);
}

std::string inputRoleName(plan::InputRole role) {
  return orUnspecified(plan::InputRole_Name(role),
                       role != plan::ROLE_UNSPECIFIED);
}

std::string lrDecayName(plan::TrainConfig::LrDecay decay) {
  return absl::AsciiStrToLower(
      orUnspecified(plan::TrainConfig::LrDecay_Name(decay),
                    decay != plan::TrainConfig::LR_DECAY_UNSPECIFIED));
}

std::string planAxisName(plan::MeshAxis axis) {
  return absl::AsciiStrToLower(plan::MeshAxis_Name(axis));
}

std::string precisionName(plan::TrainConfig::Precision precision) {
  return absl::AsciiStrToLower(
      orUnspecified(plan::TrainConfig::Precision_Name(precision),
                    precision != plan::TrainConfig::PRECISION_UNSPECIFIED));
}

} // namespace braid
