// One valid launch of every kernel in the catalogue, as check() sees it
// (descriptors and parameters only), shared by the check and storage tests.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid::test {

struct Sig {
  std::string kernel;
  std::vector<TensorDesc> ins, outs;
  KernelParams params;

  Sig &in(std::vector<int64_t> s, DType t = DType::kF32) {
    ins.push_back({std::move(s), t});
    return *this;
  }
  Sig &out(std::vector<int64_t> s, DType t = DType::kF32) {
    outs.push_back({std::move(s), t});
    return *this;
  }
  Sig &i(const char *n, int64_t v) {
    params.setInt(n, v);
    return *this;
  }
  Sig &f(const char *n, double v) {
    params.setFloat(n, v);
    return *this;
  }
  // The CPU registry entry's check.
  absl::Status check() const;
};

// f32 storage throughout (cast: f32 to bf16).
std::map<std::string, Sig> validLaunches();

// The launch in bf16 storage: every float operand bf16 except those the
// kernel's check requires to be f32 (statistics, the loss, optimizer
// operands), found by flipping back each operand the check names as
// needing f32. Empty when the result is refused for another reason.
std::optional<Sig> bf16Launch(const Sig &valid);

} // namespace braid::test
