// embedding and embedding_grad_weight on CUDA against their CPU twins.
//
// Tolerance: exact. The lookup copies rows; the gradient sums each id's
// rows in row order in f32 on both sides (the CUDA kernel sorts rows by id
// with a stable sort instead of the CPU's counting sort, which gives the
// same buckets in the same order), then adds to the old value and rounds
// once, as the CPU does. Ids outside [0, V) give zero rows and no gradient.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test {
namespace {

TwinHarness &harness() {
  static TwinHarness *h = new TwinHarness({cuda::registerEmbeddingKernels});
  return *h;
}

// Without workspace the gradient takes its scan path.
TwinHarness &noWorkspace() {
  static TwinHarness *h =
      new TwinHarness({cuda::registerEmbeddingKernels}, /*workspaceBytes=*/0);
  return *h;
}

// Ids in [0, v) with many repeats, plus some outside the table.
HostTensor idsWithRepeats(std::vector<int64_t> shape, int32_t v,
                          uint64_t seed) {
  HostTensor ids = randomIds(shape, seed, 0, v);
  for (int64_t i = 0; i < ids.numel(); i += 7)
    ids.i32()[i] = ids.i32()[0];  // a frequent id
  if (ids.numel() > 3) {
    ids.i32()[1] = -1;
    ids.i32()[2] = v;
    ids.i32()[3] = 1 << 30;
  }
  return ids;
}

TEST(EmbeddingTest, Forward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    TwinLaunch l;
    l.kernel = "embedding";
    l.ins.push_back(randomTensor({50, 24}, dt, 1));
    l.ins.push_back(idsWithRepeats({3, 17}, 50, 2));
    l.outs.push_back(zeros({3, 17, 24}, dt));
    EXPECT_TRUE(expectTwins(harness(), l, kExact)) << dtypeName(dt);
  }
}

struct GradCase {
  DType dy, dtable;
};

TEST(EmbeddingTest, GradWeight) {
  const GradCase cases[] = {{DType::kF32, DType::kF32},
                            {DType::kBF16, DType::kF32},
                            {DType::kBF16, DType::kBF16}};
  for (TwinHarness *h : {&harness(), &noWorkspace()})
    for (const GradCase &c : cases)
      for (int accumulate : {0, 1})
        for (int64_t v : {int64_t{40}, int64_t{3000}}) {
          TwinLaunch l;
          l.kernel = "embedding_grad_weight";
          l.ins.push_back(randomTensor({4, 33, 70}, c.dy, 10 + v));
          l.ins.push_back(idsWithRepeats({4, 33}, static_cast<int32_t>(v),
                                         20 + v));
          l.outs.push_back(randomTensor({v, 70}, c.dtable, 30 + v));
          l.params.setInt("accumulate", accumulate);
          EXPECT_TRUE(expectTwins(*h, l, kExact))
              << "dy " << dtypeName(c.dy) << " dtable "
              << dtypeName(c.dtable) << " accumulate " << accumulate
              << " V " << v << " workspace " << h->workspaceBytes();
        }
}

// vocab_shard: the table is rank 2 of 4's rows of a vocabulary of 4 * V;
// ids over the whole vocabulary, so most fall in other shards (zero rows,
// no gradient).
TEST(EmbeddingTest, VocabShard) {
  const int32_t v = 40, ranks = 4, rank = 2;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    TwinLaunch l;
    l.kernel = "embedding";
    l.ins.push_back(randomTensor({v, 24}, dt, 5));
    l.ins.push_back(idsWithRepeats({3, 17}, v * ranks, 6));
    l.outs.push_back(zeros({3, 17, 24}, dt));
    l.params.setInt("vocab_shard", 1);
    l.step.tpRank = rank;
    l.step.tpSize = ranks;
    EXPECT_TRUE(expectTwins(harness(), l, kExact)) << dtypeName(dt);
  }
  for (TwinHarness *h : {&harness(), &noWorkspace()})
    for (int accumulate : {0, 1}) {
      TwinLaunch l;
      l.kernel = "embedding_grad_weight";
      l.ins.push_back(randomTensor({4, 33, 70}, DType::kF32, 7));
      l.ins.push_back(idsWithRepeats({4, 33}, v * ranks, 8));
      l.outs.push_back(randomTensor({v, 70}, DType::kF32, 9));
      l.params.setInt("accumulate", accumulate);
      l.params.setInt("vocab_shard", 1);
      l.step.tpRank = rank;
      l.step.tpSize = ranks;
      EXPECT_TRUE(expectTwins(*h, l, kExact))
          << "accumulate " << accumulate << " workspace "
          << h->workspaceBytes();
    }
}

TEST(EmbeddingTest, GradWeightNoRows) {
  for (int accumulate : {0, 1}) {
    TwinLaunch l;
    l.kernel = "embedding_grad_weight";
    l.ins.push_back(zeros({0, 8}, DType::kF32));
    l.ins.push_back(zeros({0}, DType::kI32));
    l.outs.push_back(randomTensor({6, 8}, DType::kF32, 5));
    l.params.setInt("accumulate", accumulate);
    EXPECT_TRUE(expectTwins(harness(), l, kExact))
        << "accumulate " << accumulate;
  }
}

TEST(EmbeddingTest, GradWeightInGraph) {
  TwinLaunch l;
  l.kernel = "embedding_grad_weight";
  l.ins.push_back(randomTensor({2, 64, 32}, DType::kBF16, 7));
  l.ins.push_back(idsWithRepeats({2, 64}, 100, 8));
  l.outs.push_back(zeros({100, 32}, DType::kF32));
  l.params.setInt("accumulate", 1);
  std::vector<StepValues> steps(2);
  absl::StatusOr<TwinOutputs> outs =
      harness().runSteps(l, steps, GpuMode::kGraph);
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_TRUE(twinsAgree(*outs, kExact));
}

}  // namespace
}  // namespace braid::gpu_test
