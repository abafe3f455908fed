// Hot-expert replication's collectives (plan.proto REPLICATE_EXPERTS and
// REDUCE_REPLICAS, run by runCollective in runtime/executor/RunCollective.cpp)
// seen from one rank of its group, on a host communicator that plays the
// other ranks: each hot expert's weight comes from its owner, an unused
// slot is zero, and the replicas' gradients are summed along the group in
// rank order, this rank adding its own to what the rank before it passed
// on, the last rank handing the sum to the owner.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {
namespace {

// Group rank `me` of `ranks`. A broadcast from another rank fills the
// buffer with 1000 x the root + the element's index; a receive from rank s
// fills it with `fromRank[s]` (or 10 x s + the index); sends are recorded
// with their first element.
class ChainRecorder final : public Communicator {
public:
  ChainRecorder(int me, int ranks) : me_(me), ranks_(ranks) {}
  std::vector<std::string> calls;
  std::vector<std::vector<float>> sent;
  std::vector<float> fromRank[4];

  int rank() const override { return me_; }
  int size() const override { return ranks_; }
  const std::string &name() const override { return name_; }
  absl::Status allReduceSum(void *, size_t, DType) override { return no(); }
  absl::Status reduceScatterSum(const void *, void *, size_t, DType) override {
    return no();
  }
  absl::Status allGather(const void *, void *, size_t, DType) override {
    return no();
  }
  absl::Status broadcast(void *data, size_t bytes, int root) override {
    calls.push_back(absl::StrCat("broadcast from ", root));
    if (root != me_) {
      float *f = static_cast<float *>(data);
      for (size_t i = 0; i < bytes / sizeof(float); ++i)
        f[i] = static_cast<float>(1000 * root + static_cast<int>(i));
    }
    return absl::OkStatus();
  }
  absl::Status shift(const void *, void *, size_t, DType, int) override {
    return no();
  }
  absl::Status allToAllV(const void *, const size_t *, void *, const size_t *,
                         DType) override {
    return no();
  }
  absl::Status send(const void *data, size_t bytes, int peer,
                    int) override {
    calls.push_back(absl::StrCat("send to ", peer));
    const float *f = static_cast<const float *>(data);
    sent.emplace_back(f, f + bytes / sizeof(float));
    return absl::OkStatus();
  }
  absl::Status recv(void *data, size_t bytes, int peer, int) override {
    calls.push_back(absl::StrCat("recv from ", peer));
    float *f = static_cast<float *>(data);
    for (size_t i = 0; i < bytes / sizeof(float); ++i)
      f[i] = i < fromRank[peer].size()
                 ? fromRank[peer][i]
                 : static_cast<float>(10 * peer + static_cast<int>(i));
    return absl::OkStatus();
  }

private:
  static absl::Status no() { return absl::UnimplementedError("not here"); }
  int me_, ranks_;
  std::string name_ = "ep group 0";
};

// Rank 1 of 2 holds experts 2 and 3 (m = 2) of [2, 3] weights; slots: its
// own expert 3, an unused one, and rank 0's expert 1.
TEST(ReplicaCollective, ReplicateTakesEachHotExpertFromItsOwner) {
  ChainRecorder comm(1, 2);
  const TensorDesc shareDesc{{2, 2, 3}, DType::kF32};
  const TensorDesc hotDesc{{3}, DType::kI32};
  const TensorDesc slotsDesc{{3, 2, 3}, DType::kF32};
  std::vector<float> share(12), slots(18, -1.0f);
  for (int i = 0; i < 12; ++i)
    share[i] = static_cast<float>(i);
  int32_t hot[3] = {3, -1, 1};
  const TensorView ins[] = {{share.data(), &shareDesc}, {hot, &hotDesc}};
  const TensorView outs[] = {{slots.data(), &slotsDesc}};
  ASSERT_TRUE(
      runCollective(comm, {plan::REPLICATE_EXPERTS, plan::EP, ins, outs}).ok());
  EXPECT_EQ(comm.calls,
            (std::vector<std::string>{"broadcast from 1", "broadcast from 0"}));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(slots[i], share[6 + i]) << i;        // its local expert 1
    EXPECT_EQ(slots[6 + i], 0.0f) << i;            // unused
    EXPECT_EQ(slots[12 + i], 1000.0f * 0 + i) << i; // rank 0's broadcast
  }
}

// Rank 1 of 3, one expert each (m = 1), weights of 4 values. Slot 0 is
// rank 0's expert 0: rank 1 adds its gradient to rank 0's partial sum and
// passes it on to rank 2, the last, which hands it to rank 0. Slot 1 is
// rank 1's own expert 1: after passing its sum on, rank 1 receives the
// whole sum from rank 2 into its share. Sums are (rank 0's + rank 1's),
// exactly as the floats add.
TEST(ReplicaCollective, ReduceSumsAlongTheGroupInRankOrder) {
  ChainRecorder comm(1, 3);
  comm.fromRank[0] = {0.1f, 0.2f, 0.3f, 0.4f};
  comm.fromRank[2] = {7, 8, 9, 10};
  const TensorDesc gradsDesc{{2, 4}, DType::kF32};
  const TensorDesc hotDesc{{2}, DType::kI32};
  const TensorDesc shareDesc{{1, 4}, DType::kF32};
  std::vector<float> grads = {1e-8f, 1, 2, 3, 5, 6, 7, 8};
  std::vector<float> share(4, -1.0f);
  int32_t hot[2] = {0, 1};
  const TensorView ins[] = {{grads.data(), &gradsDesc}, {hot, &hotDesc}};
  const TensorView outs[] = {{share.data(), &shareDesc}};
  ASSERT_TRUE(
      runCollective(comm, {plan::REDUCE_REPLICAS, plan::EP, ins, outs}).ok());
  EXPECT_EQ(comm.calls,
            (std::vector<std::string>{"recv from 0", "send to 2",
                                      "recv from 0", "send to 2",
                                      "recv from 2"}));
  ASSERT_EQ(comm.sent.size(), 2u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(comm.sent[0][i], comm.fromRank[0][i] + grads[i]) << i;
    EXPECT_EQ(comm.sent[1][i], comm.fromRank[0][i] + grads[4 + i]) << i;
    EXPECT_EQ(share[i], comm.fromRank[2][i]) << i; // the owner's whole sum
  }
}

// Rank `me` of 2 reducing gradients {1, 2} and {3, 4} of two slots into a
// share of two experts of 2 values (experts 2 and 3 on rank 1), rank 0
// passing on {0.5, 0.25}.
struct Reduced {
  std::vector<std::string> calls;
  std::vector<std::vector<float>> sent;
  std::vector<float> share;
};

Reduced reduceOnTwoRanks(int me, int32_t hot0, int32_t hot1) {
  ChainRecorder comm(me, 2);
  comm.fromRank[0] = {0.5f, 0.25f};
  const TensorDesc gradsDesc{{2, 2}, DType::kF32};
  const TensorDesc hotDesc{{2}, DType::kI32};
  const TensorDesc shareDesc{{2, 2}, DType::kF32};
  std::vector<float> grads = {1, 2, 3, 4}, share(4, -1.0f);
  int32_t hot[2] = {hot0, hot1};
  const TensorView ins[] = {{grads.data(), &gradsDesc}, {hot, &hotDesc}};
  const TensorView outs[] = {{share.data(), &shareDesc}};
  EXPECT_TRUE(
      runCollective(comm, {plan::REDUCE_REPLICAS, plan::EP, ins, outs}).ok());
  return {comm.calls, comm.sent, share};
}

// The first rank starts the chain with its own gradient, and the last
// rank, when it is the owner, keeps the sum; an expert no rank holds is
// an unused slot, and the share's other experts are zero.
TEST(ReplicaCollective, ReduceStartsAtRankZeroAndEndsAtTheOwner) {
  const Reduced first = reduceOnTwoRanks(0, 3, 9);
  EXPECT_EQ(first.calls, (std::vector<std::string>{"send to 1"}));
  EXPECT_EQ(first.sent[0], (std::vector<float>{1, 2}));
  EXPECT_EQ(first.share, (std::vector<float>{0, 0, 0, 0}));
  const Reduced last = reduceOnTwoRanks(1, 3, 9);
  EXPECT_EQ(last.calls, (std::vector<std::string>{"recv from 0"}));
  EXPECT_EQ(last.share, (std::vector<float>{0, 0, 1.5f, 2.25f}));
}

// A slot naming an expert an earlier slot names is unused, as the kernels
// read it: no second chain, and the first slot's sum stays the owner's.
TEST(ReplicaCollective, ARepeatedHotExpertIsAnUnusedSlot) {
  const Reduced last = reduceOnTwoRanks(1, 3, 3);
  EXPECT_EQ(last.calls, (std::vector<std::string>{"recv from 0"}));
  EXPECT_EQ(last.share, (std::vector<float>{0, 0, 1.5f, 2.25f}));
}

} // namespace
} // namespace braid
