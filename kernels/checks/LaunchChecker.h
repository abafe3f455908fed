// Validation helpers shared by the kernels' load-time checks.
//
// Every message starts with the kernel name and names the offending operand
// by position and role ("linear: input 1 (weight) has shape ..."), so that a
// refused plan points at the launch and the tensor to fix.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/registry/Kernel.h"

// Returns from the enclosing function when `expr` is not OK.
#define BRAID_KERNEL_TRY(expr)                                                 \
  do {                                                                         \
    ::absl::Status braidKernelStatus_ = (expr);                                \
    if (!braidKernelStatus_.ok())                                              \
      return braidKernelStatus_;                                               \
  } while (false)

namespace braid::checks {

// This abseil build's string_view is its own type, not std::string_view.
inline absl::string_view toAbsl(std::string_view s) {
  return {s.data(), s.size()};
}
inline std::string_view toStd(absl::string_view s) {
  return {s.data(), s.size()};
}

// "[3, 5]"; "[]" for a scalar.
std::string shapeString(absl::Span<const int64_t> shape);

// One operand of a launch, with the words used to name it in messages.
struct Operand {
  const TensorDesc *desc = nullptr;
  std::string label; // "input 1 (weight)"

  const std::vector<int64_t> &shape() const { return desc->shape; }
  int64_t rank() const { return desc->rank(); }
  int64_t dim(int64_t i) const { return desc->shape[i]; }
  int64_t lastDim() const { return desc->lastDim(); }
};

class LaunchChecker {
public:
  LaunchChecker(absl::string_view kernel, const KernelSignature &sig)
      : kernel_(kernel), sig_(sig) {}

  // Checks the operand counts against the roles in `names`; the last
  // `numOptional` roles may be absent. Also refuses negative dimensions and
  // element counts that overflow.
  absl::Status inputs(std::initializer_list<absl::string_view> names,
                      int numOptional = 0);
  absl::Status outputs(std::initializer_list<absl::string_view> names,
                       int numOptional = 0);
  // At least one operand, all with the role `name`.
  absl::Status variadicInputs(absl::string_view name);
  absl::Status variadicOutputs(absl::string_view name);

  int numIns() const { return static_cast<int>(sig_.ins.size()); }
  int numOuts() const { return static_cast<int>(sig_.outs.size()); }
  Operand in(int i) const;
  Operand out(int i) const;

  // Dtypes, by the rules of docs/kernels.md "Storage precision".
  // Requires exactly `dtype` (ids are i32).
  absl::Status dtype(const Operand &op, DType dtype) const;
  // Float storage: f32 or bf16.
  absl::Status floatStorage(const Operand &op) const;
  // Float storage with the dtype of `like`: operands that share a shape
  // letter share their dtype.
  absl::Status sameDtype(const Operand &op, const Operand &like) const;
  // f32 whatever the plan's precision; `why` ends the message ("per-row
  // statistics stay f32 in every plan").
  absl::Status f32(const Operand &op, absl::string_view why) const;
  // f32(op, why) for every input and output.
  absl::Status allF32(absl::string_view why) const;
  // The output of a *_grad_weight kernel: f32, or the dtype of its input
  // `like`. A bf16 gradient over f32 inputs would lose what the f32 inputs
  // carry, so it is refused.
  absl::Status gradWeightDtype(const Operand &op, const Operand &like) const;
  absl::Status rank(const Operand &op, int64_t rank,
                    absl::string_view layout) const;
  absl::Status minRank(const Operand &op, int64_t rank,
                       absl::string_view layout) const;
  // `op` must have the shape of `like`.
  absl::Status sameShape(const Operand &op, const Operand &like) const;
  // `op` must have shape `want`; `why` ends the message ("to match ...").
  absl::Status shape(const Operand &op, absl::Span<const int64_t> want,
                     absl::string_view why) const;

  // Required integer parameter in [lo, hi].
  absl::StatusOr<int64_t> intParam(absl::string_view name, int64_t lo,
                                   int64_t hi) const;
  // Optional integer parameter in [lo, hi], `fallback` when absent.
  absl::StatusOr<int64_t> intParamOr(absl::string_view name, int64_t fallback,
                                     int64_t lo, int64_t hi) const;
  // Required finite float parameter.
  absl::StatusOr<double> floatParam(absl::string_view name) const;
  absl::StatusOr<double> floatParamOr(absl::string_view name,
                                      double fallback) const;
  // The optional `accumulate` flag: 0 or 1.
  absl::Status accumulateParam() const;

  // InvalidArgument "<kernel>: <message>".
  absl::Status error(absl::string_view message) const;

private:
  absl::Status count(bool isInput, int have,
                     std::initializer_list<absl::string_view> names,
                     int numOptional);
  absl::Status dims(bool isInput) const;

  absl::string_view kernel_;
  const KernelSignature &sig_;
  std::vector<std::string> inNames_;
  std::vector<std::string> outNames_;
};

// Shape helpers for `[..., K]` operands.
std::vector<int64_t> leadingDims(const TensorDesc &d);
std::vector<int64_t> withLastDim(const TensorDesc &d, int64_t last);

} // namespace braid::checks
