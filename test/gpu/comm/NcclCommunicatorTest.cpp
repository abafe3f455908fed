// The NCCL communicator (runtime/comm/nccl/NcclCommunicator.h) at one rank on
// one GPU: bootstrapped over a single-rank host communicator, every call and
// every collective kind of the plan (runCollective) on device buffers, with
// the values checked; the communicators of every mesh axis in order; and
// the watchdog, which aborts a call that cannot complete (a recv with no
// send) and names it, and hands the stream back.
//
// main() (test/gpu/GpuTestMain.cpp) exits with ctest's skip code when there
// is no device or no NCCL.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/comm/Ranks.h"
#include "runtime/comm/SelfCommunicator.h"
#include "runtime/comm/nccl/NcclCommunicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {
namespace {

using std::chrono::milliseconds;

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// One communicator and stream for the suite: NCCL's set-up is the slow part.
class NcclOneRank : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    host_ = new SelfCommunicator("dp group 0 (rank 0)");
    absl::StatusOr<std::unique_ptr<DeviceCommunicator>> comm =
        nccl::createNcclCommunicator(*host_, 0, milliseconds(30000));
    if (!comm.ok()) {
      made_ = comm.status();
      return;
    }
    comm_ = comm->release();
    (void)cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  }
  static void TearDownTestSuite() {
    delete comm_;
    delete host_;
    if (stream_ != nullptr)
      (void)cudaStreamDestroy(stream_);
  }
  void SetUp() override {
    ASSERT_TRUE(made_.ok()) << made_;
    ASSERT_NE(stream_, nullptr);
  }
  void TearDown() override {
    (void)cudaStreamSynchronize(stream_);
    for (void *p : buffers_)
      (void)cudaFree(p);
  }

  // A device buffer holding `values`.
  template <typename T> T *device(const std::vector<T> &values) {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(T),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    buffers_.push_back(p);
    return static_cast<T *>(p);
  }
  template <typename T> std::vector<T> host(const T *p, size_t n) {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  // Waits for the stream as the CUDA device does: polling it and the
  // watchdog, for at most `limit`.
  absl::Status drain(milliseconds limit = milliseconds(30000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const cudaError_t err = cudaStreamQuery(stream_);
      if (err == cudaSuccess)
        return comm_->poll();
      if (err != cudaErrorNotReady)
        return absl::InternalError(cudaGetErrorString(err));
      if (absl::Status s = comm_->poll(); !s.ok())
        return s;
      if (std::chrono::steady_clock::now() > deadline)
        return absl::DeadlineExceededError("the stream did not drain");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  static inline SelfCommunicator *host_ = nullptr;
  static inline DeviceCommunicator *comm_ = nullptr;
  static inline cudaStream_t stream_ = nullptr;
  static inline absl::Status made_;
  std::vector<void *> buffers_;
};

std::vector<float> ramp(size_t n, float from) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = from + 0.5f * static_cast<float>(i);
  return v;
}

TEST_F(NcclOneRank, IsTheGroupOfItsHostCommunicator) {
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->name(), "dp group 0 (rank 0)");
  EXPECT_TRUE(comm_->poll().ok());
}

TEST_F(NcclOneRank, EveryCallGivesTheSingleRanksValues) {
  const size_t n = 1000;
  const std::vector<float> values = ramp(n, -3);
  float *sum = device(values);
  int32_t *isum = device(std::vector<int32_t>{7, -8, 9});
  float *whole = device(values);
  float *shard = device(std::vector<float>(n, 0));
  float *part = device(values);
  float *gathered = device(std::vector<float>(n, 0));
  const std::vector<uint16_t> bf16 = {0x3f80, 0xbf00, 0x4049, 0x0001};
  uint16_t *bpart = device(bf16);
  uint16_t *bgathered = device(std::vector<uint16_t>(4, 0));
  uint8_t *bytes = device(std::vector<uint8_t>{1, 2, 3, 4, 5});

  ASSERT_TRUE(comm_->allReduceSum(sum, n, DType::kF32, stream_).ok());
  ASSERT_TRUE(comm_->allReduceSum(isum, 3, DType::kI32, stream_).ok());
  ASSERT_TRUE(
      comm_->reduceScatterSum(whole, shard, n, DType::kF32, stream_).ok());
  ASSERT_TRUE(comm_->allGather(part, gathered, n, DType::kF32, stream_).ok());
  ASSERT_TRUE(comm_->allGather(bpart, bgathered, 4, DType::kBF16, stream_).ok());
  ASSERT_TRUE(comm_->broadcast(bytes, 5, 0, stream_).ok());
  ASSERT_TRUE(drain().ok());

  EXPECT_EQ(host(sum, n), values);
  EXPECT_EQ(host(isum, 3), (std::vector<int32_t>{7, -8, 9}));
  EXPECT_EQ(host(shard, n), values);
  EXPECT_EQ(host(gathered, n), values);
  EXPECT_EQ(host(bgathered, 4), bf16);
  EXPECT_EQ(host(bytes, 5), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
}

TEST_F(NcclOneRank, SumsOfBf16AreRefused) {
  uint16_t *b = device(std::vector<uint16_t>{0x3f80});
  absl::Status s = comm_->allReduceSum(b, 1, DType::kBF16, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "dp group 0 (rank 0): the all-reduce sums f32 or i32, not bf16");
}

TEST_F(NcclOneRank, EveryCollectiveKindOfThePlanRunsInOneGroup) {
  // Two gradients summed in place, a reduce-scatter of a [6, 4] tensor to
  // this rank's shard (all of it at one rank), and an all-gather of an f32
  // and a bf16 shard.
  const TensorDesc grad{{6, 4}, DType::kF32};
  const TensorDesc scalar{{}, DType::kF32};
  const TensorDesc bf16{{3, 2}, DType::kBF16};
  const std::vector<float> g = ramp(24, 1), loss = {2.5f};
  const std::vector<uint16_t> w = {0x3f80, 0x4000, 0x4040,
                                   0x4080, 0x40a0, 0x40c0};
  float *gd = device(g);
  float *ld = device(loss);
  float *rsIn = device(g);
  float *rsOut = device(std::vector<float>(24, 0));
  float *agIn = device(g);
  float *agOut = device(std::vector<float>(24, 0));
  uint16_t *bIn = device(w);
  uint16_t *bOut = device(std::vector<uint16_t>(6, 0));

  const TensorView sums[] = {{gd, &grad}, {ld, &scalar}};
  ASSERT_TRUE(runCollective(*comm_, {plan::ALL_REDUCE_SUM, plan::DP, sums, {}},
                            stream_)
                  .ok());
  const TensorView rsIns[] = {{rsIn, &grad}};
  const TensorView rsOuts[] = {{rsOut, &grad}};
  ASSERT_TRUE(runCollective(*comm_,
                            {plan::REDUCE_SCATTER_SUM, plan::DP, rsIns, rsOuts},
                            stream_)
                  .ok());
  const TensorView agIns[] = {{agIn, &grad}, {bIn, &bf16}};
  const TensorView agOuts[] = {{agOut, &grad}, {bOut, &bf16}};
  ASSERT_TRUE(
      runCollective(*comm_, {plan::ALL_GATHER, plan::DP, agIns, agOuts}, stream_)
          .ok());
  ASSERT_TRUE(drain().ok());
  EXPECT_EQ(host(gd, 24), g);
  EXPECT_EQ(host(ld, 1), loss);
  EXPECT_EQ(host(rsOut, 24), g);
  EXPECT_EQ(host(agOut, 24), g);
  EXPECT_EQ(host(bOut, 6), w);
}

TEST_F(NcclOneRank, ManyCallsInFlightAreFollowedAndReleased) {
  float *x = device(ramp(4096, 0));
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(comm_->allReduceSum(x, 4096, DType::kF32, stream_).ok());
  ASSERT_TRUE(drain().ok());
  EXPECT_EQ(host(x, 4096), ramp(4096, 0));
}

// A call that cannot complete: a recv from this rank itself with no send to
// match it. Run on its own (ctest's gpu_nccl_watchdog_test sets
// BRAID_NCCL_WATCHDOG_TEST=1), since an NCCL that blocked the host in the
// call, where no watchdog sees it, would hang the process: a guard ends it
// after a minute, saying so.
TEST(NcclWatchdog, AbortsACallThatCannotCompleteAndNamesIt) {
  if (std::getenv("BRAID_NCCL_WATCHDOG_TEST") == nullptr)
    GTEST_SKIP() << "run by gpu_nccl_watchdog_test";
  std::atomic<bool> finished{false};
  std::thread guard([&finished] {
    for (int i = 0; i < 600 && !finished; ++i)
      std::this_thread::sleep_for(milliseconds(100));
    if (!finished) {
      std::fprintf(stderr, "NcclWatchdog: still blocked after 60 s: NCCL "
                           "blocks the host thread in a recv with no send, "
                           "where the watchdog cannot see it\n");
      std::_Exit(1);
    }
  });
  SelfCommunicator host("dp group 0 (rank 0)");
  auto made = nccl::createNcclCommunicator(host, 0, milliseconds(500));
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<DeviceCommunicator> comm = std::move(*made);
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *b = nullptr;
  ASSERT_CUDA(cudaMalloc(&b, 4));
  comm->setOrigin("step 7, program \"step\"");

  absl::Status posted = comm->recv(b, 4, 0, stream);
  absl::Status s = posted;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(20000);
  while (s.ok() && cudaStreamQuery(stream) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline) {
    s = comm->poll();
    std::this_thread::sleep_for(milliseconds(1));
  }
  if (!posted.ok() || s.ok()) {
    finished = true;
    guard.join();
    GTEST_SKIP() << "NCCL " << (posted.ok() ? "completed" : "refused")
                 << " a lone self-recv (" << posted.message()
                 << "); no call can hang at one rank";
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(),
            "step 7, program \"step\": the recv of 4 bytes from rank 0 in dp "
            "group 0 (rank 0) did not complete within 0.5 s of starting on "
            "its stream: a rank of the group died, hangs or is making a "
            "different call (set the limit with --comm-timeout); the NCCL "
            "communicator was aborted");
  // Aborted for good, and the stream moves on.
  EXPECT_EQ(comm->poll(), s);
  EXPECT_EQ(comm->allReduceSum(b, 1, DType::kI32, stream), s);
  cudaError_t err;
  while ((err = cudaStreamQuery(stream)) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline + milliseconds(20000))
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_NE(err, cudaErrorNotReady) << "the stream is still blocked";
  finished = true;
  guard.join();
  comm.reset();
  (void)cudaFree(b);
  (void)cudaStreamDestroy(stream);
}

TEST(NcclMesh, OneCommunicatorPerAxisInMeshOrder) {
  if (launcherWorldSize())
    GTEST_SKIP() << "started by a launcher";
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(MeshShape{}, milliseconds(10000));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  auto comms = nccl::createNcclCommunicators(**ranks, 0, milliseconds(30000));
  ASSERT_TRUE(comms.ok()) << comms.status();
  const char *names[] = {"tp group 0 (rank 0)", "cp group 0 (rank 0)",
                         "pp group 0 (rank 0)", "dp group 0 (rank 0)"};
  for (int a = 0; a < kNumMeshAxes; ++a) {
    ASSERT_NE((*comms)[a], nullptr);
    EXPECT_EQ((*comms)[a]->name(), names[a]);
    EXPECT_EQ((*comms)[a]->size(), 1);
  }
  (*ranks)->attachDevice(std::move(*comms));
  EXPECT_EQ((*ranks)->deviceAxis(MeshAxis::kDP)->name(), names[3]);
}

} // namespace
} // namespace braid
