// Helpers shared by the row-kernel twin tests (rows/*Test.cpp): building
// launches, taking the CPU forward outputs as inputs of a backward launch,
// and the tolerances both storage dtypes use.
//
// Tolerance rationale used throughout:
//   - f32: the CUDA kernel computes the CPU's formula in f32 but adds in a
//     different order (tree reductions), may contract a * b + c into one
//     fused multiply-add, and uses CUDA's expf/logf (within 2 ulp) where
//     the CPU uses its own polynomial exp (within 1 ulp). Each of these is
//     a few ulp (about 1e-7 relative) per operation, so element-wise
//     outputs get rtol 1e-5; reductions over n terms get an absolute
//     allowance of about n * 2^-24 times the terms' magnitude on top.
//   - bf16: both sides read the same bf16 inputs exactly and round their
//     f32 result once. The f32 results differ by the amounts above, which
//     can move a value across a rounding boundary: one bf16 ulp, at most
//     2^-7 of the value (8 significant bits). So rtol = 2^-7, plus a small
//     atol where outputs come from cancelling terms. A real error (wrong
//     index, wrong mask, wrong formula) is orders of magnitude larger.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test::rows_test {

inline constexpr double kBf16Rtol = 1.0 / 128.0;

inline const char *dtypeLabel(DType d) {
  return d == DType::kBF16 ? "bf16" : "f32";
}

inline TwinLaunch launchOf(std::string kernel, std::vector<HostTensor> ins,
                           std::vector<HostTensor> outs,
                           KernelParams params = {}) {
  TwinLaunch l;
  l.kernel = std::move(kernel);
  l.ins = std::move(ins);
  l.outs = std::move(outs);
  l.params = std::move(params);
  return l;
}

// The CPU outputs of a launch (forward values that a backward launch
// takes as inputs); fails the test and returns empty on error.
inline std::vector<HostTensor> cpuOutputs(TwinHarness &h,
                                          const TwinLaunch &l) {
  absl::StatusOr<std::vector<HostTensor>> outs = h.runCpu(l, {l.step});
  EXPECT_TRUE(outs.ok()) << l.kernel << ": " << outs.status().ToString();
  return outs.ok() ? *outs : std::vector<HostTensor>{};
}

// Runs both sides and compares each output with its own tolerance.
inline ::testing::AssertionResult
twins(TwinHarness &h, const TwinLaunch &l, const std::vector<Tolerance> &tols,
      GpuMode mode = GpuMode::kEager) {
  absl::StatusOr<TwinOutputs> outs = h.run(l, mode);
  if (!outs.ok())
    return ::testing::AssertionFailure()
           << l.kernel << ": " << outs.status().ToString();
  ::testing::AssertionResult r = twinsAgree(*outs, tols);
  if (!r)
    return ::testing::AssertionFailure() << l.kernel << ": " << r.message();
  return r;
}

// Two GPU runs of the same launch give the same bits.
inline ::testing::AssertionResult deterministic(TwinHarness &h,
                                                const TwinLaunch &l) {
  absl::StatusOr<std::vector<HostTensor>> a =
      h.runGpu(l, {l.step}, GpuMode::kEager);
  absl::StatusOr<std::vector<HostTensor>> b =
      h.runGpu(l, {l.step}, GpuMode::kEager);
  if (!a.ok() || !b.ok())
    return ::testing::AssertionFailure()
           << l.kernel << ": "
           << (a.ok() ? b.status() : a.status()).ToString();
  for (size_t i = 0; i < a->size(); ++i)
    if ((*a)[i].bytes != (*b)[i].bytes)
      return ::testing::AssertionFailure()
             << l.kernel << ": output " << i << " differs between two runs";
  return ::testing::AssertionSuccess();
}

} // namespace braid::gpu_test::rows_test
