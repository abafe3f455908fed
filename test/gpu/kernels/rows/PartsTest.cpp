// take_part, stack_parts and unstack_parts on CUDA against the CPU
// (docs/kernels.md, "Sequence parallel"). Pure copies: exact in every dtype
// (f32, bf16, i32), for shapes whose runs move as 16-byte vectors and for
// odd ones that fall back to narrower units, and for every TP rank of
// take_part, including ranks past the parts (zeros).
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerPartsKernels});
  return *h;
}

HostTensor input(const std::vector<int64_t> &shape, DType dt, uint64_t seed) {
  if (dt == DType::kI32)
    return randomIds(shape, seed, -100000, 100000);
  return randomTensor(shape, dt, seed);
}

const char *label(DType dt) {
  return dt == DType::kI32 ? "i32" : dtypeLabel(dt);
}

KernelParams dimParam(int64_t dim) {
  KernelParams p;
  p.setInt("dim", dim);
  return p;
}

TEST(CudaPartsKernels, TakePartIsExactOnEveryRank) {
  // [B, S, H]: H = 64 moves as vectors, H = 7 does not.
  for (const std::vector<int64_t> &whole :
       {std::vector<int64_t>{3, 40, 64}, std::vector<int64_t>{3, 40, 7}})
    for (DType dt : {DType::kF32, DType::kBF16, DType::kI32})
      for (int64_t dim : {0, 1, 2})
        for (int64_t ranks : {2, 4}) {
          if (whole[dim] % ranks != 0)
            continue;
          std::vector<int64_t> part = whole;
          part[dim] /= ranks;
          const HostTensor x = input(whole, dt, 7 + dim);
          // Ranks past the parts too: a TP axis of 2 * ranks.
          for (int64_t r = 0; r < 2 * ranks; ++r) {
            SCOPED_TRACE(::testing::Message()
                         << label(dt) << " H " << whole[2] << " dim " << dim
                         << " rank " << r << " of " << ranks);
            TwinLaunch l =
                launchOf("take_part", {x}, {zeros(part, dt)}, dimParam(dim));
            l.step.tpRank = r;
            l.step.tpSize = 2 * ranks;
            EXPECT_TRUE(twins(harness(), l, {kExact}));
          }
        }
}

TEST(CudaPartsKernels, StackAndUnstackAreExact) {
  struct Case {
    std::vector<int64_t> x; // of stack_parts
    int64_t dim, parts;
  };
  for (const Case &c : {Case{{3, 40, 64}, 1, 4}, Case{{3, 40, 7}, 1, 2},
                        Case{{2, 5, 48}, 2, 4}, Case{{2, 3, 6, 5}, 2, 3}})
    for (DType dt : {DType::kF32, DType::kBF16, DType::kI32}) {
      SCOPED_TRACE(::testing::Message()
                   << label(dt) << " dim " << c.dim << " parts " << c.parts
                   << " last " << c.x.back());
      std::vector<int64_t> stacked = c.x;
      stacked[c.dim] /= c.parts;
      stacked[0] *= c.parts;
      EXPECT_TRUE(twins(harness(),
                        launchOf("stack_parts", {input(c.x, dt, 11)},
                                 {zeros(stacked, dt)}, dimParam(c.dim)),
                        {kExact}));
      EXPECT_TRUE(twins(harness(),
                        launchOf("unstack_parts", {input(stacked, dt, 12)},
                                 {zeros(c.x, dt)}, dimParam(c.dim)),
                        {kExact}));
    }
}

// Context parallelism's balanced parts (docs/kernels.md, "Context
// parallel"): take_part of every CP rank (axis 2), and stack_parts /
// unstack_parts whose runs are half parts.
TEST(CudaPartsKernels, BalancedPartsAreExact) {
  struct Case {
    std::vector<int64_t> x; // the whole tensor (of stack_parts)
    int64_t dim, parts;
  };
  for (const Case &c : {Case{{3, 40, 64}, 1, 4}, Case{{3, 40, 7}, 1, 2},
                        Case{{2, 5, 48}, 2, 4}, Case{{2, 3, 12, 5}, 2, 3}})
    for (DType dt : {DType::kF32, DType::kBF16, DType::kI32}) {
      SCOPED_TRACE(::testing::Message()
                   << label(dt) << " dim " << c.dim << " parts " << c.parts
                   << " last " << c.x.back());
      KernelParams p = dimParam(c.dim);
      p.setInt("balanced", 1);
      std::vector<int64_t> part = c.x;
      part[c.dim] /= c.parts;
      std::vector<int64_t> stacked = part;
      stacked[0] *= c.parts;
      EXPECT_TRUE(twins(harness(),
                        launchOf("stack_parts", {input(c.x, dt, 14)},
                                 {zeros(stacked, dt)}, p),
                        {kExact}));
      EXPECT_TRUE(twins(harness(),
                        launchOf("unstack_parts", {input(stacked, dt, 15)},
                                 {zeros(c.x, dt)}, p),
                        {kExact}));
      KernelParams take = p;
      take.setInt("axis", 2);
      // Ranks past the parts too: a CP axis of parts + 1.
      for (int64_t r = 0; r <= c.parts; ++r) {
        SCOPED_TRACE(::testing::Message() << "CP rank " << r);
        TwinLaunch l = launchOf("take_part", {input(c.x, dt, 16)},
                                {zeros(part, dt)}, take);
        l.step.cpRank = r;
        l.step.cpSize = c.parts + 1;
        l.step.tpRank = c.parts + 1; // not the axis read
        l.step.tpSize = c.parts + 2;
        EXPECT_TRUE(twins(harness(), l, {kExact}));
      }
    }
}

// Captured once and replayed: a copy has no step values, and the TP rank
// is the rank's own on every run.
TEST(CudaPartsKernels, TakePartInGraphs) {
  const std::vector<int64_t> whole = {2, 16, 32}, part = {2, 4, 32};
  TwinLaunch l = launchOf("take_part", {input(whole, DType::kBF16, 13)},
                          {zeros(part, DType::kBF16)}, dimParam(1));
  l.step.tpRank = 3;
  l.step.tpSize = 4;
  absl::StatusOr<TwinOutputs> outs =
      harness().runSteps(l, {l.step, l.step}, GpuMode::kGraph);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(twinsAgree(*outs, kExact));
}

} // namespace
} // namespace braid::gpu_test::rows_test
