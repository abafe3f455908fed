// embedding and embedding_grad_weight: exact gather and scatter-add;
// document_ids: the document of each token.
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

TEST(Embedding, GathersRowsExactly) {
  const int v = 11, d = 5;
  auto table = randomVector(v * d, 1);
  std::vector<int32_t> ids = {3, 0, 10, 3, 7, 1};
  Launch l("embedding");
  l.in({v, d}, table).inIds({2, 3}, ids).out({2, 3, d});
  l.run(&testPool(2));
  expectThreadInvariant(l);
  std::vector<double> want;
  for (int32_t id : ids)
    for (int j = 0; j < d; ++j)
      want.push_back(table[id * d + j]);
  expectNear(l.output(0), want, 0, 0, "y");
}

TEST(Embedding, OutOfRangeIdGivesZeroRow) {
  const int v = 4, d = 3;
  Launch l("embedding");
  l.in({v, d}, randomVector(v * d, 2)).inIds({2}, {-1, 4}).out({2, d});
  l.run();
  expectNear(l.output(0), std::vector<double>(2 * d, 0.0), 0, 0, "y");
}

// Sums dy rows per id in row order, as the kernel promises.
std::vector<float> refGrad(const std::vector<float> &dy,
                           const std::vector<int32_t> &ids, int v, int d) {
  std::vector<float> out(v * d, 0.0f);
  std::vector<bool> seen(v, false);
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int j = 0; j < d; ++j) {
      float &o = out[ids[r] * d + j];
      o = seen[ids[r]] ? o + dy[r * d + j] : dy[r * d + j];
    }
    seen[ids[r]] = true;
  }
  return out;
}

TEST(EmbeddingGradWeight, SumsRowsPerIdAndAccumulatesExactly) {
  const int v = 9, d = 7, rows = 3 * 13;
  auto dy = randomVector(rows * d, 3);
  auto ids = randomIds(rows, 4, v - 2); // ids v-2, v-1 stay unused
  std::vector<float> want = refGrad(dy, ids, v, d);
  Launch g("embedding_grad_weight");
  g.in({3, 13, d}, dy).inIds({3, 13}, ids).out({v, d});
  g.run();
  EXPECT_EQ(g.output(0), want); // same order of additions: exact

  auto old = randomVector(v * d, 5);
  Launch acc("embedding_grad_weight");
  acc.in({3, 13, d}, dy).inIds({3, 13}, ids).out({v, d}, old);
  acc.param("accumulate", 1);
  acc.run(&testPool(3));
  for (int i = 0; i < v * d; ++i)
    EXPECT_EQ(acc.output(0)[i], old[i] + want[i]) << i;

  expectThreadInvariant(g);
  expectThreadInvariant(acc);
}

TEST(EmbeddingGradWeight, MatchesFiniteDifferencesOfEmbedding) {
  const int v = 6, d = 4, rows = 10;
  auto table = randomVector(v * d, 6), proj = randomVector(rows * d, 7);
  auto ids = randomIds(rows, 8, v);
  Launch fwd("embedding");
  fwd.in({v, d}, table).inIds({rows}, ids).out({rows, d});
  Launch g("embedding_grad_weight");
  g.in({rows, d}, proj).inIds({rows}, ids).out({v, d});
  g.run();
  expectGradientMatches(
      [&](const std::vector<float> &t) {
        Launch f = fwd;
        f.input(0) = t;
        f.run();
        return project(proj, f.output(0));
      },
      table, g.output(0), 1e-2, 1e-5, 1e-6, 9, "table");
}

// A separator ends its document: the ids count the separators before each
// position, row by row (first and last positions, runs of separators, a
// row without any).
TEST(DocumentIds, CountsSeparatorsBeforeEachPosition) {
  const int32_t sep = 7;
  const std::vector<int32_t> tokens = {
      sep, 1, 2, sep, sep, 3, 4, sep, // row 0
      1,   2, 3, 4,   5,   6, 0, 1,   // row 1: one document
      sep, sep, sep, sep, sep, sep, sep, sep};
  const std::vector<int32_t> want = {
      0, 1, 1, 1, 2, 3, 3, 3, //
      0, 0, 0, 0, 0, 0, 0, 0, //
      0, 1, 2, 3, 4, 5, 6, 7};
  for (int threads : {0, 1, 3}) {
    Launch l("document_ids");
    l.inIds({3, 8}, tokens).outIds({3, 8}).param("separator", sep);
    l.run(threads ? &testPool(threads) : nullptr);
    EXPECT_EQ(l.outputIds(0), want) << threads << " threads";
  }
}

TEST(DocumentIds, ChecksShapesAndSeparator) {
  Launch l("document_ids");
  l.inDesc({2, 5}, DType::kI32).outDesc({2, 5}, DType::kI32);
  EXPECT_FALSE(l.check().ok()) << "separator is required";
  l.param("separator", -1);
  EXPECT_FALSE(l.check().ok()) << "a negative separator is no token";
  l.param("separator", 0);
  EXPECT_TRUE(l.check().ok()) << l.check();
  Launch wrong("document_ids");
  wrong.inDesc({2, 5}, DType::kI32).outDesc({2, 4}, DType::kI32)
      .param("separator", 0);
  EXPECT_FALSE(wrong.check().ok());
}

} // namespace
} // namespace braid::test
