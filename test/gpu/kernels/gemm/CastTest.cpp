// cast, fill and accumulate on CUDA against their CPU twins.
//
// Tolerance: exact, bit for bit. Each element is one conversion or one f32
// addition rounded once, the same on both sides; NaN stays NaN (any NaN
// matches any NaN in the comparison; the CUDA kernel keeps the CPU's
// payload anyway).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test {
namespace {

TwinHarness &harness() {
  static TwinHarness *h = new TwinHarness({cuda::registerCastKernels});
  return *h;
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Values that exercise rounding: ties to even both ways, just above and
// below ties, the largest finite values, overflow to inf, subnormals,
// signed zeros, infinities and NaNs; then random values.
std::vector<float> awkwardValues(int64_t n) {
  std::vector<float> v = {
      0.0f, -0.0f, 1.0f, -1.0f,
      bitsToFloat(0x3f808000u),  // tie, even below: rounds down
      bitsToFloat(0x3f818000u),  // tie, odd below: rounds up
      bitsToFloat(0x3f808001u),  // just above a tie
      bitsToFloat(0x3f807fffu),  // just below a tie
      bitsToFloat(0x7f7fffffu),  // largest f32: rounds to inf
      bitsToFloat(0x7f7f7fffu),  // stays the largest bf16
      bitsToFloat(0x00000001u),  // smallest subnormal
      bitsToFloat(0x807fffffu),  // negative subnormal
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      bitsToFloat(0x7fc00000u), bitsToFloat(0xffbfffffu),
      bitsToFloat(0x7f800001u),  // signalling NaN
  };
  HostTensor r = randomTensor({n}, DType::kF32, 77, -1000.0f, 1000.0f);
  for (int64_t i = static_cast<int64_t>(v.size()); i < n; ++i)
    v.push_back(r.f32()[i]);
  v.resize(n);
  return v;
}

TEST(CastTest, AllDirections) {
  const int64_t n = 5001;
  const std::vector<float> values = awkwardValues(n);
  for (DType from : {DType::kF32, DType::kBF16})
    for (DType to : {DType::kF32, DType::kBF16}) {
      TwinLaunch l;
      l.kernel = "cast";
      l.ins.push_back(tensorOf({3, n / 3}, from, values));
      l.outs.push_back(zeros({3, n / 3}, to));
      absl::StatusOr<TwinOutputs> outs = harness().run(l);
      ASSERT_TRUE(outs.ok()) << outs.status();
      EXPECT_TRUE(twinsAgree(*outs, kExact))
          << dtypeName(from) << " -> " << dtypeName(to);
      // Non-NaN results are the same bits (zeros keep their sign).
      EXPECT_EQ(outs->cpu[0].bytes.size(), outs->gpu[0].bytes.size());
      for (int64_t i = 0; i < outs->cpu[0].numel(); ++i) {
        const float c = outs->cpu[0].at(i);
        if (std::isnan(c))
          continue;
        EXPECT_EQ(std::signbit(c), std::signbit(outs->gpu[0].at(i))) << i;
      }
    }
}

TEST(CastTest, Fill) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (double value : {0.0, -2.5, 1.0 / 3.0, 1e30}) {
      TwinLaunch l;
      l.kernel = "fill";
      l.outs.push_back(randomTensor({7, 33}, dt, 3));
      l.params.setFloat("value", value);
      EXPECT_TRUE(expectTwins(harness(), l, kExact))
          << dtypeName(dt) << " " << value;
    }
}

TEST(CastTest, Accumulate) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    TwinLaunch l;
    l.kernel = "accumulate";
    l.ins.push_back(randomTensor({1000, 3}, dt, 4));
    l.outs.push_back(randomTensor({1000, 3}, dt, 5));
    EXPECT_TRUE(expectTwins(harness(), l, kExact)) << dtypeName(dt);
  }
}

TEST(CastTest, EmptyTensors) {
  TwinLaunch l;
  l.kernel = "cast";
  l.ins.push_back(zeros({0, 4}, DType::kF32));
  l.outs.push_back(zeros({0, 4}, DType::kBF16));
  EXPECT_TRUE(expectTwins(harness(), l, kExact));
}

TEST(CastTest, InGraph) {
  TwinLaunch l;
  l.kernel = "cast";
  l.ins.push_back(randomTensor({300}, DType::kF32, 6));
  l.outs.push_back(zeros({300}, DType::kBF16));
  EXPECT_TRUE(expectTwins(harness(), l, kExact, GpuMode::kGraph));
  TwinLaunch copy = l;
  copy.outs[0] = zeros({300}, DType::kF32);
  EXPECT_TRUE(expectTwins(harness(), copy, kExact, GpuMode::kGraph));
}

}  // namespace
}  // namespace braid::gpu_test
