// A collective instruction on a device communicator (runCollective in
// runtime/executor/RunCollective.cpp), on a communicator that records what
// it is asked: the counts and buffers the plan's kinds give (an all-reduce
// in place, a reduce-scatter's count its output's shard, an all-gather's
// its input's), on the instruction's stream, in one group that is ended
// even when a call fails.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {
namespace {

class RecordingCommunicator final : public DeviceCommunicator {
public:
  std::vector<std::string> calls;
  bool failAllGather = false;

  int rank() const override { return 1; }
  int size() const override { return 2; }
  const std::string &name() const override { return name_; }
  void setOrigin(std::string) override {}
  absl::Status allReduceSum(void *data, size_t count, DType dtype,
                            void *stream) override {
    calls.push_back(absl::StrCat("all-reduce ", at(data), " ", count, " ",
                                 std::string(dtypeName(dtype)), " on ",
                                 at(stream)));
    return absl::OkStatus();
  }
  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype, void *stream) override {
    calls.push_back(absl::StrCat("reduce-scatter ", at(in), " -> ", at(out),
                                 " ", count, " ", std::string(dtypeName(dtype)),
                                 " on ", at(stream)));
    return absl::OkStatus();
  }
  absl::Status allGather(const void *in, void *out, size_t count, DType dtype,
                         void *stream) override {
    calls.push_back(absl::StrCat("all-gather ", at(in), " -> ", at(out), " ",
                                 count, " ", std::string(dtypeName(dtype)),
                                 " on ", at(stream)));
    if (failAllGather)
      return absl::InternalError("no");
    return absl::OkStatus();
  }
  absl::Status broadcast(void *, size_t, int, void *) override {
    return absl::OkStatus();
  }
  absl::Status send(const void *, size_t, int, void *) override {
    return absl::OkStatus();
  }
  absl::Status recv(void *, size_t, int, void *) override {
    return absl::OkStatus();
  }
  absl::Status beginGroup() override {
    calls.push_back("begin");
    return absl::OkStatus();
  }
  absl::Status endGroup() override {
    calls.push_back("end");
    return absl::OkStatus();
  }
  absl::Status poll() override { return absl::OkStatus(); }

  // Buffers and streams are named by their offset from `base`.
  const char *base = nullptr;

private:
  int64_t at(const void *p) const {
    return static_cast<const char *>(p) - base;
  }
  std::string name_ = "dp group 0 (ranks 0, 1)";
};

TEST(DeviceCollective, EachKindGivesItsCountsOnTheInstructionsStream) {
  char memory[4096];
  RecordingCommunicator comm;
  comm.base = memory;
  void *stream = memory + 4000;
  const TensorDesc whole{{8, 4}, DType::kF32};
  const TensorDesc shard{{4, 4}, DType::kF32};
  const TensorDesc scalar{{}, DType::kF32};
  const TensorDesc bf16Shard{{2, 3}, DType::kBF16};
  const TensorDesc bf16Whole{{4, 3}, DType::kBF16};

  const TensorView sums[] = {{memory + 0, &whole}, {memory + 256, &scalar}};
  ASSERT_TRUE(runCollective(comm, {plan::ALL_REDUCE_SUM, plan::DP, sums, {}},
                            stream)
                  .ok());
  const TensorView in[] = {{memory + 512, &whole}};
  const TensorView out[] = {{memory + 1024, &shard}};
  ASSERT_TRUE(runCollective(comm, {plan::REDUCE_SCATTER_SUM, plan::DP, in, out},
                            stream)
                  .ok());
  const TensorView parts[] = {{memory + 1024, &shard},
                              {memory + 2048, &bf16Shard}};
  const TensorView wholes[] = {{memory + 1536, &whole},
                               {memory + 3072, &bf16Whole}};
  ASSERT_TRUE(
      runCollective(comm, {plan::ALL_GATHER, plan::DP, parts, wholes}, stream)
          .ok());
  EXPECT_EQ(comm.calls, (std::vector<std::string>{
                            "begin",
                            "all-reduce 0 32 f32 on 4000",
                            "all-reduce 256 1 f32 on 4000",
                            "end",
                            "begin",
                            "reduce-scatter 512 -> 1024 16 f32 on 4000",
                            "end",
                            "begin",
                            "all-gather 1024 -> 1536 16 f32 on 4000",
                            "all-gather 2048 -> 3072 6 bf16 on 4000",
                            "end",
                        }));
}

TEST(DeviceCollective, AGroupIsEndedWhenACallFails) {
  char memory[1024];
  RecordingCommunicator comm;
  comm.base = memory;
  comm.failAllGather = true;
  const TensorDesc shard{{2}, DType::kF32};
  const TensorDesc whole{{4}, DType::kF32};
  const TensorView parts[] = {{memory, &shard}, {memory + 64, &shard}};
  const TensorView wholes[] = {{memory + 128, &whole}, {memory + 256, &whole}};
  absl::Status s = runCollective(
      comm, {plan::ALL_GATHER, plan::DP, parts, wholes}, memory);
  EXPECT_EQ(s.message(), "no");
  EXPECT_EQ(comm.calls, (std::vector<std::string>{
                            "begin", "all-gather 0 -> 128 2 f32 on 0", "end"}));
  EXPECT_FALSE(runCollective(comm,
                             {plan::COLLECTIVE_UNSPECIFIED, plan::DP, parts,
                              wholes},
                             memory)
                   .ok());
}

// Expert parallel's exchanges run on CPU ranks only: a device
// communicator refuses them, clearly, before enqueuing anything.
TEST(DeviceCollective, ExpertExchangesAreRefused) {
  char memory[256];
  RecordingCommunicator comm;
  comm.base = memory;
  const TensorDesc rows{{4, 2}, DType::kF32};
  const TensorDesc counts{{8}, DType::kI32};
  const TensorView ins[] = {{memory, &rows}, {memory + 64, &counts}};
  const TensorView outs[] = {{memory + 128, &rows}};
  for (plan::CollectiveKind kind :
       {plan::DISPATCH, plan::COMBINE, plan::REPLICATE_EXPERTS,
        plan::REDUCE_REPLICAS}) {
    absl::Status s = runCollective(comm, {kind, plan::EP, ins, outs}, memory);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(std::string(s.message()).find("CPU ranks only"),
              std::string::npos)
        << s;
  }
  EXPECT_TRUE(comm.calls.empty());
}

} // namespace
} // namespace braid
