// document_ids on CUDA against the CPU: integer counts, so exact. The
// outputs start from garbage, so that an id the kernel fails to write shows.
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerDocumentKernels});
  return *h;
}

TwinLaunch documentIds(HostTensor tokens, int64_t separator, uint64_t seed) {
  KernelParams p;
  p.setInt("separator", separator);
  const std::vector<int64_t> shape = tokens.desc.shape;
  return launchOf("document_ids", {std::move(tokens)},
                  {randomIds(shape, seed, -50, 50)}, p);
}

// Separators at the first and last positions, next to each other, none,
// and everywhere; the ids are also checked against their definition.
TEST(CudaDocumentKernels, SmallRowsMatchCpu) {
  const std::vector<int32_t> tokens = {
      2, 5, 2, 2, 7, 1, 3, 2, //
      1, 3, 4, 0, 6, 5, 9, 8, //
      2, 2, 2, 2, 2, 2, 2, 2, //
      4, 4, 4, 4, 4, 4, 4, 2, //
  };
  const std::vector<int32_t> expected = {
      0, 1, 1, 2, 3, 3, 3, 3, //
      0, 0, 0, 0, 0, 0, 0, 0, //
      0, 1, 2, 3, 4, 5, 6, 7, //
      0, 0, 0, 0, 0, 0, 0, 0, //
  };
  absl::StatusOr<TwinOutputs> outs =
      harness().run(documentIds(i32Tensor({4, 8}, tokens), 2, 1));
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(twinsAgree(*outs, kExact));
  ASSERT_EQ(outs->gpu.size(), 1u);
  const HostTensor &ids = outs->gpu[0];
  ASSERT_EQ(ids.numel(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < ids.numel(); ++i)
    EXPECT_EQ(ids.i32()[i], expected[i]) << "at " << i;
}

// Rows of many tiles of the block, lengths not a multiple of it, and a
// single token; about one token in four is a separator.
TEST(CudaDocumentKernels, LongRowsMatchCpu) {
  struct Case {
    int64_t b, s;
  };
  uint64_t seed = 10;
  for (const Case &c : {Case{3, 3000}, Case{2, 256}, Case{5, 1},
                        Case{1, 40000}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << c.b << " S=" << c.s);
    const HostTensor tokens = randomIds({c.b, c.s}, ++seed, 0, 4);
    EXPECT_TRUE(expectTwins(harness(), documentIds(tokens, 3, ++seed),
                            kExact));
  }
}

// Captured in a CUDA graph and replayed: no host sync, no allocation.
TEST(CudaDocumentKernels, CapturedInGraphs) {
  const HostTensor tokens = randomIds({4, 700}, 77, 0, 6);
  EXPECT_TRUE(expectTwins(harness(), documentIds(tokens, 0, 78), kExact,
                          GpuMode::kGraph));
}

} // namespace
} // namespace braid::gpu_test::rows_test
