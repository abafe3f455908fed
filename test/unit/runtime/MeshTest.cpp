// The rank mesh (runtime/comm/Mesh.h): TP innermost, DP outermost, and the
// groups along each axis; the single-rank run's communicators.
#include "runtime/comm/Mesh.h"

#include <chrono>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

#include "runtime/comm/EmulatedLink.h"
#include "runtime/comm/Ranks.h"
#include "runtime/comm/SelfCommunicator.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

MeshShape shape(int64_t tp, int64_t cp, int64_t pp, int64_t dp) {
  MeshShape s;
  s.sizes = {tp, cp, pp, dp};
  return s;
}

TEST(Mesh, TensorParallelIsInnermost) {
  const MeshShape s = shape(2, 1, 3, 4);
  EXPECT_EQ(s.worldSize(), 24);
  EXPECT_EQ(s.describe(), "tp 2 x cp 1 x pp 3 x dp 4");
  // rank = ((dp * PP + pp) * CP + cp) * TP + tp
  EXPECT_EQ(meshCoords(s, 0), (MeshCoords{0, 0, 0, 0}));
  EXPECT_EQ(meshCoords(s, 1), (MeshCoords{1, 0, 0, 0}));
  EXPECT_EQ(meshCoords(s, 2), (MeshCoords{0, 0, 1, 0}));
  EXPECT_EQ(meshCoords(s, 7), (MeshCoords{1, 0, 0, 1}));
  for (int64_t r = 0; r < s.worldSize(); ++r)
    EXPECT_EQ(meshRank(s, meshCoords(s, r)), r);
}

TEST(Mesh, GroupsDifferAlongTheirAxisOnly) {
  const MeshShape s = shape(2, 1, 3, 4);
  EXPECT_EQ(meshGroup(s, 7, MeshAxis::kTP), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(meshGroup(s, 7, MeshAxis::kPP), (std::vector<int64_t>{7, 9, 11}));
  EXPECT_EQ(meshGroup(s, 7, MeshAxis::kDP),
            (std::vector<int64_t>{1, 7, 13, 19}));
  EXPECT_EQ(meshGroup(s, 7, MeshAxis::kCP), (std::vector<int64_t>{7}));
  // A group's members share its index; the indices cover 0..world/size-1.
  for (MeshAxis a : kMeshAxes) {
    std::vector<int> seen(s.worldSize() / s.size(a), 0);
    for (int64_t r = 0; r < s.worldSize(); ++r) {
      const int64_t g = meshGroupIndex(s, r, a);
      ASSERT_LT(g, static_cast<int64_t>(seen.size()));
      for (int64_t peer : meshGroup(s, r, a))
        EXPECT_EQ(meshGroupIndex(s, peer, a), g);
      ++seen[g];
    }
    for (int n : seen)
      EXPECT_EQ(n, s.size(a)) << meshAxisName(a);
  }
}

// Context parallel's gradient group: the ranks of one TP and PP coordinate,
// in the order dp * CP + cp.
TEST(Mesh, TheDataGroupSpansDpAndCp) {
  const MeshShape s = shape(2, 2, 1, 2);
  EXPECT_EQ(meshDataGroup(s, 1), (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(meshDataGroup(s, 6), (std::vector<int64_t>{0, 2, 4, 6}));
  const MeshShape p = shape(1, 2, 2, 1);
  EXPECT_EQ(meshDataGroup(p, 3), (std::vector<int64_t>{2, 3}));
  std::vector<int> seen(s.worldSize() / 4, 0);
  for (int64_t r = 0; r < s.worldSize(); ++r) {
    const int64_t g = meshDataGroupIndex(s, r);
    ASSERT_LT(g, static_cast<int64_t>(seen.size()));
    for (int64_t peer : meshDataGroup(s, r))
      EXPECT_EQ(meshDataGroupIndex(s, peer), g);
    ++seen[g];
  }
  for (int n : seen)
    EXPECT_EQ(n, 4);
}

// Expert parallel within DP: EP groups are consecutive DP ranks (a rank's
// index dp % EP), EDP groups the DP ranks that hold the same experts
// (index dp / EP); each splits every DP group evenly.
TEST(Mesh, ExpertGroupsSplitEachDataParallelGroup) {
  MeshShape s = shape(2, 1, 1, 4);
  s.expert = 2;
  EXPECT_EQ(s.describe(), "tp 2 x cp 1 x pp 1 x dp 4 (ep 2 within dp)");
  // Rank 5: tp 1, dp 2.
  EXPECT_EQ(meshExpertGroup(s, 5), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(meshExpertDataGroup(s, 5), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(meshExpertRank(s, 5), 0);
  EXPECT_EQ(meshExpertDataRank(s, 5), 1);
  for (auto [group, index, size] :
       {std::tuple{&meshExpertGroup, &meshExpertGroupIndex, int64_t{2}},
        std::tuple{&meshExpertDataGroup, &meshExpertDataGroupIndex,
                   int64_t{2}}}) {
    std::vector<int> seen(s.worldSize() / size, 0);
    for (int64_t r = 0; r < s.worldSize(); ++r) {
      const std::vector<int64_t> members = group(s, r);
      EXPECT_EQ(static_cast<int64_t>(members.size()), size);
      const int64_t g = index(s, r);
      ASSERT_LT(g, static_cast<int64_t>(seen.size()));
      for (int64_t peer : members)
        EXPECT_EQ(index(s, peer), g);
      ++seen[g];
    }
    for (int n : seen)
      EXPECT_EQ(n, size);
  }
  // A rank's place in its EP group is its index among the members.
  for (int64_t r = 0; r < s.worldSize(); ++r)
    EXPECT_EQ(meshExpertGroup(s, r)[meshExpertRank(s, r)], r);
}

// Under context parallel an EP group stays within one CP coordinate (each
// CP rank exchanges its own tokens), and an EDP group takes the CP ranks
// of its DP ranks too: every rank of it holds a part of the experts'
// gradient.
TEST(Mesh, ExpertDataGroupsTakeTheContextParallelRanks) {
  MeshShape s = shape(1, 2, 1, 4);
  s.expert = 2;
  // Rank 5: cp 1, dp 2.
  EXPECT_EQ(meshExpertGroup(s, 5), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(meshExpertDataGroup(s, 5), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(meshExpertDataRank(s, 5), 3);
  std::vector<int> seen(2, 0);
  for (int64_t r = 0; r < s.worldSize(); ++r) {
    const std::vector<int64_t> members = meshExpertDataGroup(s, r);
    ASSERT_EQ(members.size(), 4u);
    EXPECT_EQ(members[meshExpertDataRank(s, r)], r);
    const int64_t g = meshExpertDataGroupIndex(s, r);
    ASSERT_LT(g, 2);
    for (int64_t peer : members)
      EXPECT_EQ(meshExpertDataGroupIndex(s, peer), g);
    ++seen[g];
  }
  EXPECT_EQ(seen, (std::vector<int>{4, 4}));
}

// The exchange of one rank: its own rows come back; the counts must agree.
TEST(Mesh, AnAllToAllOfOneRankCopies) {
  SelfCommunicator self("ep group 0 (rank 0)");
  const float in[3] = {1, 2, 3};
  float out[3] = {};
  const size_t three = 3, two = 2;
  ASSERT_TRUE(self.allToAllV(in, &three, out, &three, DType::kF32).ok());
  EXPECT_EQ(out[2], 3);
  EXPECT_FALSE(self.allToAllV(in, &three, out, &two, DType::kF32).ok());
}

// Around a ring of one rank, a shift gives back what it sent.
TEST(Mesh, AShiftOnOneRankCopies) {
  SelfCommunicator self("cp group 0 (rank 0)");
  const float in[3] = {1, 2, 3};
  float out[3] = {};
  ASSERT_TRUE(self.shift(in, out, 3, DType::kF32, 1).ok());
  EXPECT_EQ(out[2], 3);
}

TEST(Ranks, OneProcessWithoutALauncherIsTheSingleRank) {
  if (launcherWorldSize())
    GTEST_SKIP() << "started by a launcher";
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(shape(1, 1, 1, 1), std::chrono::seconds(1));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ((*ranks)->rank(), 0);
  Communicator &dp = (*ranks)->axis(MeshAxis::kDP);
  EXPECT_EQ(dp.size(), 1);
  EXPECT_EQ(dp.name(), "dp group 0 (rank 0)");
  float v[2] = {1, 2}, out[2] = {};
  EXPECT_TRUE(dp.allReduceSum(v, 2, DType::kF32).ok());
  EXPECT_EQ(v[1], 2);
  EXPECT_TRUE(dp.allGather(v, out, 2, DType::kF32).ok());
  EXPECT_EQ(out[1], 2);
  EXPECT_FALSE(dp.send(v, 4, 1, 0).ok());
  // Without CP the gradient group is the DP axis's; without EP the EDP
  // group is too, and the EP group is the rank alone.
  EXPECT_EQ(&(*ranks)->dataGroup(), &dp);
  EXPECT_EQ(&(*ranks)->expertDataGroup(), &dp);
  EXPECT_EQ(&(*ranks)->group(plan::EDP), &dp);
  EXPECT_EQ((*ranks)->expertGroup().size(), 1);
  EXPECT_EQ((*ranks)->expertRank(), 0);

  absl::StatusOr<std::unique_ptr<Ranks>> four =
      Ranks::join(shape(1, 1, 1, 4), std::chrono::seconds(1));
  ASSERT_FALSE(four.ok());
  EXPECT_EQ(four.status().message(),
            "the plan's mesh (tp 1 x cp 1 x pp 1 x dp 4) has 4 ranks; start "
            "it with mpirun -np 4 (or srun -n 4)");
}

TEST(Ranks, AWorldOfTheWrongSizeIsRefusedBeforeAnyWork) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(shape(1, 1, 1, 2), std::chrono::seconds(1));
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_FALSE(ranks.ok());
  EXPECT_EQ(ranks.status().message(),
            "the plan's mesh (tp 1 x cp 1 x pp 1 x dp 2) has 2 ranks but 3 "
            "were started; launch it with -np 2, or recompile the spec for 3 "
            "ranks (parallel.data_parallel x tensor_parallel x "
            "context_parallel x pipeline_parallel)");
}

TEST(EmulatedLink, ParsesLatencyAndBandwidth) {
  absl::StatusOr<LinkModel> link = parseLinkModel("25:2");
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(link->latency, std::chrono::microseconds(25));
  EXPECT_EQ(link->bytesPerSecond, 2e9);
  EXPECT_EQ(link->describe(), "25 us, 2 GB/s");
  for (const char *bad : {"25", "25:0", "-1:2", "a:b", "25:2:3"})
    EXPECT_EQ(parseLinkModel(bad).status().message(),
              absl::StrCat("the link \"", bad,
                           "\" is not LATENCY_US:GBPS, e.g. 25:2 for 25 us "
                           "and 2 GB/s"));
}

TEST(EmulatedLink, HoldsACallForLatencyPlusBytesOverBandwidth) {
  LinkModel link;
  link.latency = std::chrono::milliseconds(20);
  link.bytesPerSecond = 1e9; // 1 MB: 1 ms more
  EmulatedLink comm(std::make_unique<SelfCommunicator>("dp group 0 (rank 0)"),
                    link);
  std::vector<uint8_t> data(1'000'000);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(comm.broadcast(data.data(), data.size(), 0).ok());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(21));
  EXPECT_EQ(comm.name(), "dp group 0 (rank 0)");
}

} // namespace
} // namespace braid
