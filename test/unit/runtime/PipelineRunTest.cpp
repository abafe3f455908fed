// What a pipeline rank shares with the single-rank run of the same model:
// its parameters start bit for bit where the whole plan's do, its
// checkpoints hold the whole plan's tensors, and its transfers reach the
// peer and channel the plan names (the multi-rank runs themselves are
// test/mpi/pipeline.test).
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/executor/StreamTarget.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/ParameterInit.h"
#include "runtime/train/WholeTensors.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyPipelinePlan.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

LoadedPlan loaded(const plan::Plan &p) {
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(p.SerializeAsString(), test::testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? std::move(*plan) : LoadedPlan();
}

// Every parameter's initial bytes, by name.
std::map<std::string, std::vector<uint8_t>> initialised(const LoadedPlan &p) {
  std::vector<uint8_t> arena(p.proto.memory().arena_bytes());
  initParameters(p, arena.data(), nullptr);
  std::map<std::string, std::vector<uint8_t>> out;
  for (uint32_t id : p.parameters) {
    const plan::Tensor &t = p.proto.tensors(id);
    out[t.name()].assign(arena.begin() + t.offset(),
                         arena.begin() + t.offset() + t.size_bytes());
  }
  return out;
}

TEST(PipelineRun, ParametersStartAsInTheWholePlan) {
  // Draws are keyed by the seed and the parameter's name, never by its
  // place in a plan, so a stage draws what the whole plan draws.
  const LoadedPlan whole = loaded(test::tinyModelPlan());
  const LoadedPlan pipeline = loaded(test::tinyPipelinePlan());
  ASSERT_EQ(pipeline.stages.size(), 2u);
  std::map<std::string, std::vector<uint8_t>> split;
  for (const LoadedPlan &stage : pipeline.stages)
    for (auto &[name, bytes] : initialised(stage))
      EXPECT_TRUE(split.emplace(name, std::move(bytes)).second) << name;
  const std::map<std::string, std::vector<uint8_t>> one = initialised(whole);
  ASSERT_EQ(split.size(), one.size());
  for (const auto &[name, bytes] : one) {
    ASSERT_TRUE(split.count(name)) << name;
    EXPECT_TRUE(split.at(name) == bytes) << name << " differs";
  }
  // The embedding is drawn, not constant: the comparison means something.
  const std::vector<uint8_t> &embed = one.at("model.embed_tokens.weight");
  EXPECT_FALSE(std::all_of(embed.begin(), embed.end(),
                           [](uint8_t b) { return b == 0; }));
}

TEST(PipelineRun, ACheckpointHoldsTheWholePlansTensors) {
  const LoadedPlan whole = loaded(test::tinyModelPlan());
  LoadedPlan pipeline = loaded(test::tinyPipelinePlan());
  ASSERT_EQ(pipeline.stages.size(), 2u);
  auto names = [](const LoadedPlan &p) {
    std::map<std::string, std::vector<int64_t>> out;
    for (const ckpt::StoredTensor &s : ckpt::modelTensors(p))
      out[s.name] = s.shape;
    for (const ckpt::StoredTensor &s : ckpt::optimizerTensors(p))
      out[s.name] = s.shape;
    return out;
  };
  for (int64_t k = 0; k < 2; ++k) {
    // As a pipeline rank builds it: its own stage moved out of the list.
    std::vector<LoadedPlan> stages = pipeline.stages;
    LoadedPlan mine = std::move(stages[k]);
    WholeTensors image(mine, stages, k);
    EXPECT_EQ(names(image.plan()), names(whole));
    EXPECT_EQ(image.plan().proto.name(), whole.proto.name());
    // Every tensor has bytes of its own in the image.
    uint64_t end = 0;
    for (const plan::Tensor &t : image.plan().proto.tensors()) {
      EXPECT_GE(t.offset(), end) << t.name();
      end = t.offset() + t.size_bytes();
    }
    EXPECT_LE(end, image.imageBytes());
  }
}

// A host communicator of rank 1 of 3 that records its point-to-point calls.
class RecordingCommunicator final : public Communicator {
public:
  std::vector<std::string> calls;
  int rank() const override { return 1; }
  int size() const override { return 3; }
  const std::string &name() const override { return name_; }
  absl::Status allReduceSum(void *, size_t, DType) override {
    return absl::OkStatus();
  }
  absl::Status reduceScatterSum(const void *, void *, size_t, DType) override {
    return absl::OkStatus();
  }
  absl::Status allGather(const void *, void *, size_t, DType) override {
    return absl::OkStatus();
  }
  absl::Status broadcast(void *, size_t, int) override {
    return absl::OkStatus();
  }
  absl::Status shift(const void *, void *, size_t, DType, int) override {
    return absl::OkStatus();
  }
  absl::Status allToAllV(const void *, const size_t *, void *, const size_t *,
                         DType) override {
    return absl::OkStatus();
  }
  absl::Status send(const void *, size_t bytes, int peer, int tag) override {
    calls.push_back(absl::StrCat("send ", bytes, " to ", peer, " tag ", tag));
    return absl::OkStatus();
  }
  absl::Status recv(void *, size_t bytes, int peer, int tag) override {
    calls.push_back(absl::StrCat("recv ", bytes, " from ", peer, " tag ", tag));
    return absl::OkStatus();
  }

private:
  std::string name_ = "pp group 0 (ranks 0, 1, 2)";
};

// The same for device memory (no tags: one communicator per channel).
class RecordingDeviceCommunicator final : public DeviceCommunicator {
public:
  std::vector<std::string> calls;
  int rank() const override { return 1; }
  int size() const override { return 3; }
  const std::string &name() const override { return name_; }
  void setOrigin(std::string) override {}
  absl::Status allReduceSum(void *, size_t, DType, void *) override {
    return absl::OkStatus();
  }
  absl::Status reduceScatterSum(const void *, void *, size_t, DType,
                                void *) override {
    return absl::OkStatus();
  }
  absl::Status allGather(const void *, void *, size_t, DType, void *) override {
    return absl::OkStatus();
  }
  absl::Status broadcast(void *, size_t, int, void *) override {
    return absl::OkStatus();
  }
  absl::Status send(const void *, size_t bytes, int peer,
                    void *stream) override {
    calls.push_back(absl::StrCat("send ", bytes, " to ", peer, " on ",
                                 reinterpret_cast<uintptr_t>(stream)));
    return absl::OkStatus();
  }
  absl::Status recv(void *, size_t bytes, int peer, void *stream) override {
    calls.push_back(absl::StrCat("recv ", bytes, " from ", peer, " on ",
                                 reinterpret_cast<uintptr_t>(stream)));
    return absl::OkStatus();
  }
  absl::Status beginGroup() override { return absl::OkStatus(); }
  absl::Status endGroup() override { return absl::OkStatus(); }
  absl::Status poll() override { return absl::OkStatus(); }

private:
  std::string name_ = "pp group 0 (ranks 0, 1, 2)";
};

TEST(PipelineRun, ATransferReachesThePeerAtItsOffsetOnItsChannel) {
  float data[6] = {};
  TensorDesc f32{{2, 3}, DType::kF32};
  TensorDesc bf16{{2, 3}, DType::kBF16};
  const TransferCall calls[] = {
      {true, TensorView{data, &f32}, +1, 0},
      {false, TensorView{data, &f32}, -1, 0},
      {true, TensorView{data, &bf16}, -1, 1},
      {false, TensorView{data, &bf16}, +2, 1},
  };
  RecordingCommunicator host;
  RecordingDeviceCommunicator device;
  for (const TransferCall &call : calls) {
    ASSERT_TRUE(runTransfer(host, call).ok());
    ASSERT_TRUE(
        runTransfer(device, call, reinterpret_cast<void *>(uintptr_t{7})).ok());
  }
  // Rank 1 of 3: +1 is rank 2, -1 rank 0, +2 wraps around to rank 0.
  EXPECT_EQ(host.calls, (std::vector<std::string>{
                            "send 24 to 2 tag 0", "recv 24 from 0 tag 0",
                            "send 12 to 0 tag 1", "recv 12 from 0 tag 1"}));
  EXPECT_EQ(device.calls, (std::vector<std::string>{
                              "send 24 to 2 on 7", "recv 24 from 0 on 7",
                              "send 12 to 0 on 7", "recv 12 from 0 on 7"}));
}

} // namespace
} // namespace braid
