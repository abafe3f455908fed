// Adaptive recompute's kernels (docs/moe.md, docs/kernels.md): the kept
// rows give back exactly what the grouped GEMM computed, the clone with
// recompute_above computes only above the kept rows, and each keep counts
// its choice.
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr int kRows = 10, kExperts = 2, kIn = 5, kOut = 3, kKept = 6;

// Two senders' blocks of two experts: 2, 1 | 0, 2 rows (5 received), or
// 3, 2 | 1, 2 (8 received); the rest of the 10 rows spare.
const std::vector<int32_t> kFew = {0, 2, 3, 3, 5};
const std::vector<int32_t> kMany = {0, 3, 5, 6, 8};

Launch gemm(const std::vector<int32_t> &offsets) {
  Launch l("moe_grouped_linear");
  l.in({kRows, kIn}, randomVector(kRows * kIn, 1))
      .in({kExperts, kOut, kIn}, randomVector(kExperts * kOut * kIn, 2))
      .inIds({5}, offsets)
      .out({kRows, kOut}, randomVector(kRows * kOut, 3));
  return l;
}

// The forward's GEMM, kept; the backward's clone, skipped; the restore
// writes the kept rows and zeros into the clone's output: the GEMM's
// output bit for bit.
TEST(MoeAdaptiveRecompute, KeptRowsRestoreTheGemmExactly) {
  Launch forward = gemm(kFew);
  forward.run(&testPool(2));
  const std::vector<float> y = forward.output(0);

  Launch keep("moe_keep_rows");
  keep.in({kRows, kOut}, y).inIds({5}, kFew).out({kKept, kOut});
  keep.run();

  Launch clone = gemm(kFew);
  clone.param("recompute_above", kKept);
  clone.run(&testPool(2));
  EXPECT_EQ(clone.output(0), randomVector(kRows * kOut, 3))
      << "the clone computed although the rows were kept";

  Launch restore("moe_restore_rows");
  restore.in({kKept, kOut}, keep.output(0)).inIds({5}, kFew)
      .out({kRows, kOut}, clone.output(0));
  restore.run();
  EXPECT_EQ(restore.output(0), y);
}

// Above the kept rows the keep writes nothing, the clone computes as the
// forward did and the restore leaves its rows as they are.
TEST(MoeAdaptiveRecompute, AboveTheKeptRowsTheCloneComputes) {
  Launch forward = gemm(kMany);
  forward.run();
  const std::vector<float> y = forward.output(0);

  const std::vector<float> before = randomVector(kKept * kOut, 7);
  Launch keep("moe_keep_rows");
  keep.in({kRows, kOut}, y).inIds({5}, kMany).out({kKept, kOut}, before);
  keep.run();
  EXPECT_EQ(keep.output(0), before);

  Launch clone = gemm(kMany);
  clone.param("recompute_above", kKept);
  clone.run();
  EXPECT_EQ(clone.output(0), y);

  Launch restore("moe_restore_rows");
  restore.in({kKept, kOut}, keep.output(0)).inIds({5}, kMany)
      .out({kRows, kOut}, clone.output(0));
  restore.run();
  EXPECT_EQ(restore.output(0), y);
}

TEST(MoeAdaptiveRecompute, EachKeepCountsItsChoice) {
  KernelCounters counters;
  for (const auto *offsets : {&kFew, &kMany, &kFew}) {
    Launch keep("moe_keep_rows");
    keep.in({kRows, kOut}, randomVector(kRows * kOut, 8)).inIds({5}, *offsets)
        .out({kKept, kOut});
    keep.context().counters = &counters;
    keep.run();
  }
  EXPECT_EQ(counters.activationsKept.load(), 2);
  EXPECT_EQ(counters.activationsRecomputed.load(), 1);
}

TEST(MoeAdaptiveRecompute, ChecksRefuseKeptRowsThatDoNotFit) {
  Launch wide("moe_keep_rows");
  wide.in({kRows, kOut}, randomVector(kRows * kOut, 9)).inIds({5}, kFew)
      .out({kKept, kOut + 1});
  EXPECT_FALSE(wide.check().ok());
  Launch more("moe_restore_rows");
  more.in({kRows + 1, kOut}, randomVector((kRows + 1) * kOut, 9))
      .inIds({5}, kFew).out({kRows, kOut});
  EXPECT_FALSE(more.check().ok());
  Launch negative = gemm(kFew);
  negative.param("recompute_above", -2);
  EXPECT_FALSE(negative.check().ok());
}

} // namespace
} // namespace braid::test
