// Expert parallel's exchanges (plan.proto DISPATCH and COMBINE, run by
// runCollective in runtime/executor/RunCollective.cpp) on a host
// communicator that records the counts it is asked for and plays the other
// rank: what each rank sends and receives comes from the group's gathered
// counts, the rows past those received are zero, and a rank that would
// receive more rows than the plan holds stops every rank alike, with the
// expert and the counts, before anything moves, as do counts that route
// more rows than a rank has. (A device communicator
// refuses them: DeviceCollectiveTest.cpp.)
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {
namespace {

// Group rank 1 of 2. The all-to-all fills each rank's part of `out` with
// 100 x the sender + the row's index within its part, so that the test can
// see where every row landed.
class ExchangeRecorder final : public Communicator {
public:
  std::vector<std::string> calls;
  int rank() const override { return 1; }
  int size() const override { return 2; }
  const std::string &name() const override { return name_; }
  absl::Status allReduceSum(void *, size_t, DType) override { return no(); }
  absl::Status reduceScatterSum(const void *, void *, size_t, DType) override {
    return no();
  }
  absl::Status allGather(const void *, void *, size_t, DType) override {
    return no();
  }
  absl::Status broadcast(void *, size_t, int) override { return no(); }
  absl::Status shift(const void *, void *, size_t, DType, int) override {
    return no();
  }
  absl::Status allToAllV(const void *, const size_t *sendCounts, void *out,
                         const size_t *recvCounts, DType dtype) override {
    calls.push_back(absl::StrCat("send ", sendCounts[0], ",", sendCounts[1],
                                 " recv ", recvCounts[0], ",", recvCounts[1]));
    EXPECT_EQ(dtype, DType::kF32);
    float *o = static_cast<float *>(out);
    for (int s = 0; s < 2; ++s)
      for (size_t i = 0; i < recvCounts[s]; ++i)
        *o++ = static_cast<float>(100 * s + static_cast<int>(i));
    return absl::OkStatus();
  }
  absl::Status send(const void *, size_t, int, int) override { return no(); }
  absl::Status recv(void *, size_t, int, int) override { return no(); }

private:
  static absl::Status no() { return absl::UnimplementedError("not here"); }
  std::string name_ = "ep group 0 (ranks 0, 1)";
};

// Two ranks with two experts each (experts 0-1 on rank 0, 2-3 on rank 1):
// counts[s][e] = the rows rank s sends expert e.
constexpr int32_t kCounts[2][4] = {{1, 2, 3, 0}, {2, 0, 1, 1}};

TEST(ExpertExchange, DispatchAndCombineTakeTheirCountsFromTheGroupsCounts) {
  ExchangeRecorder comm;
  const TensorDesc countsDesc{{8}, DType::kI32};
  // Rank 1 sends 4 rows (2 to rank 0's experts, 1 + 1 to its own) of
  // width 2 from a buffer of 6 (the most a rank routes: rank 0's 6), and
  // receives rank 0's 3 + 0 and its own 1 + 1 into room for 8.
  const TensorDesc dataDesc{{6, 2}, DType::kF32};
  const TensorDesc roomDesc{{8, 2}, DType::kF32};
  std::vector<float> data(12, 1.0f), room(16, -1.0f);
  int32_t counts[8];
  std::memcpy(counts, kCounts, sizeof counts);
  const TensorView ins[] = {{data.data(), &dataDesc}, {counts, &countsDesc}};
  const TensorView outs[] = {{room.data(), &roomDesc}};
  ASSERT_TRUE(runCollective(comm, {plan::DISPATCH, plan::EP, ins, outs}).ok());
  // Elements: rows x width 2.
  EXPECT_EQ(comm.calls.back(), "send 4,4 recv 6,4");
  // Rank 0's 3 rows, then its own 2; the 3 rows past them are zero.
  EXPECT_EQ(room[5], 5.0f);
  EXPECT_EQ(room[6], 100.0f);
  EXPECT_EQ(room[9], 103.0f);
  for (int i = 10; i < 16; ++i)
    EXPECT_EQ(room[i], 0.0f) << i;

  // The way back sends each rank what came from it and gets its 4 rows.
  const TensorView back[] = {{room.data(), &roomDesc}, {counts, &countsDesc}};
  const TensorView rows[] = {{data.data(), &dataDesc}};
  ASSERT_TRUE(runCollective(comm, {plan::COMBINE, plan::EP, back, rows}).ok());
  EXPECT_EQ(comm.calls.back(), "send 6,4 recv 4,4");
}

TEST(ExpertExchange, AnExceededBoundStopsWithTheExpertAndTheCounts) {
  ExchangeRecorder comm;
  const TensorDesc countsDesc{{8}, DType::kI32};
  const TensorDesc dataDesc{{6, 2}, DType::kF32};
  // Room for 4 rows: rank 0's experts get 1 + 2 + 2 + 0 = 5.
  const TensorDesc roomDesc{{4, 2}, DType::kF32};
  std::vector<float> data(12, 1.0f), room(8, 0.0f);
  int32_t counts[8];
  std::memcpy(counts, kCounts, sizeof counts);
  const TensorView ins[] = {{data.data(), &dataDesc}, {counts, &countsDesc}};
  const TensorView outs[] = {{room.data(), &roomDesc}};
  absl::Status s = runCollective(comm, {plan::DISPATCH, plan::EP, ins, outs});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "the dropless bound is exceeded: expert 0 received 3 token rows; "
            "rank 0 of ep group 0 (ranks 0, 1), which holds experts 0 to 1, "
            "received 5 in all, more than the 4 rows the plan holds for "
            "them; raise model.moe.dropless_bound, or set it to 0 for the "
            "worst case");
  // Nothing moved.
  EXPECT_TRUE(comm.calls.empty());
}

// Counts that route more of a rank's rows than its buffer holds are the
// plan's or a kernel's error: refused before anything moves, on every
// rank alike (rank 0 routes 6 rows; the buffer holds 4).
TEST(ExpertExchange, CountsBeyondARanksRowsAreRefused) {
  ExchangeRecorder comm;
  const TensorDesc countsDesc{{8}, DType::kI32};
  const TensorDesc dataDesc{{4, 2}, DType::kF32};
  const TensorDesc roomDesc{{8, 2}, DType::kF32};
  std::vector<float> data(8, 1.0f), room(16, 0.0f);
  int32_t counts[8];
  std::memcpy(counts, kCounts, sizeof counts);
  const TensorView ins[] = {{data.data(), &dataDesc}, {counts, &countsDesc}};
  const TensorView outs[] = {{room.data(), &roomDesc}};
  absl::Status s = runCollective(comm, {plan::DISPATCH, plan::EP, ins, outs});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "the counts say rank 0 of ep group 0 (ranks 0, 1) routed 6 token "
            "rows, more than the 4 rows of its buffer: the plan or its counts "
            "are inconsistent");
  EXPECT_TRUE(comm.calls.empty());
}

} // namespace
} // namespace braid
