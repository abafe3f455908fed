// The partition (passes/pipeline/Partition.h): the automatic one with its
// empty-layer padding, and explicit layouts with their errors.
#include "passes/pipeline/Partition.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::pipeline {
namespace {

using ::testing::HasSubstr;

Placement interleaved(int64_t ranks, int64_t chunks) {
  return Placement{ranks, chunks, false};
}

std::vector<int64_t> layerCounts(const Partition &p) {
  std::vector<int64_t> out;
  for (const StageLayers &s : p.stages)
    out.push_back(s.layers);
  return out;
}

std::vector<int64_t> paddings(const Partition &p) {
  std::vector<int64_t> out;
  for (const StageLayers &s : p.stages)
    out.push_back(s.padding);
  return out;
}

TEST(Partition, EvenSplitHasNoPadding) {
  absl::StatusOr<Partition> p =
      partitionLayers(8, interleaved(4, 1), PartitionCosts{1, 0.1, 0.4});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(p->padding(), 0);
  EXPECT_TRUE(p->stages.front().embedding);
  EXPECT_TRUE(p->stages.back().loss);
  EXPECT_EQ(p->stages[2].first, 4);
}

// 61 layers on PP=8 with VPP=2: 16 stages of 4 slots, 64 in all, so 3 are
// empty. The loss makes the last stage dearest, the embedding the first;
// the third empty slot goes to the latest of the even stages.
TEST(Partition, SixtyOneLayersOnSixteenStages) {
  absl::StatusOr<Partition> p =
      partitionLayers(61, interleaved(8, 2), PartitionCosts{1, 0.01, 0.5});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->padding(), 3);
  std::vector<int64_t> counts(16, 4);
  counts[15] = counts[0] = counts[14] = 3;
  EXPECT_EQ(layerCounts(*p), counts);
  for (const StageLayers &s : p->stages)
    EXPECT_EQ(s.layers + s.padding, 4);
  // Real layers keep their model indices: 0..60, in order, none skipped.
  EXPECT_EQ(p->stages[15].first + p->stages[15].layers, 61);
  EXPECT_EQ(p->stages[1].first, 3);
  EXPECT_EQ(p->describe()[15],
            "stage 15 (rank 7, chunk 1): layers 58-60, 1 empty layer, loss");
  EXPECT_EQ(p->describe()[0],
            "stage 0 (rank 0, chunk 0): embedding, layers 0-2, 1 empty layer");
}

// A loss dearer than a layer empties more of the last stage, down to one
// layer: 5 layers over 2 stages become 4 + 1, in slots of 4.
TEST(Partition, DearLossUnloadsTheLastStage) {
  absl::StatusOr<Partition> p =
      partitionLayers(5, interleaved(2, 1), PartitionCosts{1, 0, 10});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(paddings(*p), (std::vector<int64_t>{0, 3}));
}

// Even where the layers divide, a loss worth 2.5 layers moves layers off
// the last stage, in more slots: 8 layers over 4 stages become 3 2 2 1
// (dearest 3.5, against 4.5 for 2 2 2 2), in slots of 3.
TEST(Partition, LossCostRebalancesAnEvenSplit) {
  absl::StatusOr<Partition> p =
      partitionLayers(8, interleaved(4, 1), PartitionCosts{1, 0, 2.5});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{3, 2, 2, 1}));
  EXPECT_EQ(paddings(*p), (std::vector<int64_t>{0, 1, 1, 2}));
}

TEST(Partition, DualPipeVStagesSitInAV) {
  absl::StatusOr<Partition> p =
      partitionLayers(8, Placement{2, 2, true}, PartitionCosts{});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<std::string> lines = p->describe();
  EXPECT_EQ(lines[0], "stage 0 (rank 0, chunk 0): embedding, layers 0-1");
  EXPECT_EQ(lines[1], "stage 1 (rank 1, chunk 0): layers 2-3");
  EXPECT_EQ(lines[2], "stage 2 (rank 1, chunk 1): layers 4-5");
  EXPECT_EQ(lines[3], "stage 3 (rank 0, chunk 1): layers 6-7, loss");
}

// Balance is per rank: under DualPipeV's V rank 0 holds the first stage
// and the last, so the embedding and the loss both weigh on it, and its
// two stages give layers away where a per-stage balance would leave them
// full. 16 layers over 8 stages with a loss worth 2.5 layers.
TEST(Partition, BalancesRanksNotStages) {
  const Placement v{4, 2, true};
  absl::StatusOr<Partition> p = partitionLayers(16, v, PartitionCosts{1, 0, 2.5});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<double> rank(4, 0);
  for (int64_t s = 0; s < 8; ++s)
    rank[v.rankOf(s)] += p->stages[s].layers + (p->stages[s].loss ? 2.5 : 0);
  // Rank 0: 1 + (1 + 2.5); ranks 1 and 2: 3 + 2; rank 3: 2 + 2. An even
  // 2 per stage would cost rank 0 6.5.
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{1, 3, 3, 2, 2, 2, 2, 1}));
  EXPECT_EQ(rank, (std::vector<double>{4.5, 5, 5, 4}));
}

TEST(Partition, MoreStagesThanLayersIsRefused) {
  absl::StatusOr<Partition> p =
      partitionLayers(3, interleaved(2, 2), PartitionCosts{});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("the pipeline has 4 stages but the model only 3 "
                        "layers"));
}

TEST(Layout, ParsesCountsPaddingEmbeddingAndLoss) {
  absl::StatusOr<Partition> p =
      parseLayout("E t*3 p | t*4 | tttt | t*3 p L", 14, interleaved(4, 1));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{3, 4, 4, 3}));
  EXPECT_EQ(paddings(*p), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(p->stages[3].first, 11);
  EXPECT_TRUE(p->stages[0].embedding);
  EXPECT_TRUE(p->stages[3].loss);
}

// The embedding or the loss may have a stage to itself.
TEST(Layout, StageOfItsOwn) {
  absl::StatusOr<Partition> p =
      parseLayout("E|t*2|t*2|L", 4, interleaved(2, 2));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(layerCounts(*p), (std::vector<int64_t>{0, 2, 2, 0}));
}

TEST(Layout, Errors) {
  auto error = [](const std::string &layout, int64_t layers,
                  Placement placement = Placement{2, 1, false}) {
    absl::StatusOr<Partition> p = parseLayout(layout, layers, placement);
    return p.ok() ? std::string("ok") : std::string(p.status().message());
  };
  EXPECT_EQ(error("E t*2 | t*2 L", 5),
            "pipeline_layout \"E t*2 | t*2 L\": its t's sum to 4 layers, "
            "the model has 5");
  EXPECT_THAT(error("E t | t | t L", 3),
              HasSubstr("it has 3 stages ('|' separates them), the "
                        "pipeline 2"));
  EXPECT_THAT(error("E t | t | t L", 3, Placement{1, 2, false}),
              HasSubstr("the pipeline 2 (1 rank x 2 chunks)"));
  EXPECT_THAT(error("t E | t L", 2), HasSubstr("E (the embedding) must open"));
  EXPECT_THAT(error("t | t L", 2), HasSubstr("E (the embedding) must open"));
  EXPECT_THAT(error("E t | L t", 2), HasSubstr("L (the loss) must close"));
  EXPECT_THAT(error("E t L | t", 2), HasSubstr("L (the loss) must close"));
  EXPECT_THAT(error("E t | t", 2), HasSubstr("L (the loss) must close"));
  EXPECT_THAT(error("E t | x L", 2), HasSubstr("'x' is not an item"));
  EXPECT_THAT(error("E t*x | t L", 2), HasSubstr("'t*' needs a count"));
  EXPECT_THAT(error("E t t | p | L", 2, Placement{3, 1, false}),
              HasSubstr("stage 1 holds nothing"));
}

} // namespace
} // namespace braid::pipeline
