// What people and scripts read: units, the progress line, the JSON record
// and the memory report.
#include <cmath>
#include <string>

#include "runtime/ckpt/Json.h"
#include "runtime/train/HumanUnits.h"
#include "runtime/train/MemoryReport.h"
#include "runtime/train/ProgressLog.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

TEST(HumanUnits, Bytes) {
  EXPECT_EQ(humanBytes(0), "0 B");
  EXPECT_EQ(humanBytes(1023), "1023 B");
  EXPECT_EQ(humanBytes(1536), "1.50 KiB");
  EXPECT_EQ(humanBytes(uint64_t{23} * 1024 * 1024 + 400 * 1024), "23.4 MiB");
  EXPECT_EQ(humanBytes(uint64_t{7} << 30), "7.00 GiB");
  EXPECT_EQ(humanBytes(uint64_t{1000} * 1024), "0.98 MiB");
  EXPECT_EQ(humanBytes(UINT64_MAX), "16.0 EiB");
}

TEST(HumanUnits, CountsAndDurations) {
  EXPECT_EQ(humanCount(950), "950");
  EXPECT_EQ(humanCount(41234.5), "41.2k");
  EXPECT_EQ(humanCount(3.1e6), "3.10M");
  EXPECT_EQ(humanCount(NAN), "-");
  EXPECT_EQ(humanDuration(107), "0:01:47");
  EXPECT_EQ(humanDuration(12 * 3600 + 5), "12:00:05");
  EXPECT_EQ(humanDuration(-1), "-:--:--");
  EXPECT_EQ(humanDuration(INFINITY), "-:--:--");
}

StepReport sample() {
  StepReport r;
  r.step = 12;
  r.totalSteps = 300;
  r.loss = 2.8431;
  r.lr = 1.8e-3;
  r.gradNorm = 0.912;
  r.tokensPerSecond = 41234.5;
  r.mfu = 0.231;
  r.etaSeconds = 107;
  return r;
}

TEST(ProgressLog, ProgressLine) {
  EXPECT_EQ(formatProgressLine(sample()),
            "step   12/300 | loss 2.8431 | lr 1.80e-03 | grad_norm 0.912 | "
            "41.2k tok/s | MFU 23.1% | ETA 0:01:47");
  StepReport r = sample();
  r.mfu = -1;
  r.totalSteps = 123456;
  EXPECT_EQ(formatProgressLine(r),
            "step     12/123456 | loss 2.8431 | lr 1.80e-03 | grad_norm "
            "0.912 | 41.2k tok/s | ETA 0:01:47");
}

TEST(ProgressLog, JsonLineRoundTripsFloats) {
  StepReport r = sample();
  r.loss = static_cast<float>(2.8431);
  std::string line = formatJsonLine(r);
  EXPECT_EQ(line,
            "{\"step\":12,\"loss\":2.84310007,\"lr\":0.0018,\"grad_norm\":"
            "0.912,\"tokens_per_s\":41234.5}");
  absl::StatusOr<JsonValue> v = parseJson(line);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(static_cast<float>(std::stod(v->find("loss")->text)),
            static_cast<float>(2.8431));
  r.loss = NAN;
  EXPECT_NE(formatJsonLine(r).find("\"loss\":null"), std::string::npos);
  EXPECT_TRUE(parseJson(formatJsonLine(r)).ok());
}

// Adaptive recompute: each rank's recomputed activations in the JSON line,
// and the log line naming the ranks that hold MoE layers (at most 8).
TEST(ProgressLog, AdaptiveRecomputeByRank) {
  StepReport r = sample();
  r.activationsKept = {0, 4, 0, 3};
  r.activationsRecomputed = {4, 0, 0, 1};
  EXPECT_EQ(formatJsonLine(r),
            "{\"step\":12,\"loss\":2.8431,\"lr\":0.0018,\"grad_norm\":"
            "0.912,\"tokens_per_s\":41234.5,\"experts_recomputed\":[4,0,0,1]}");
  EXPECT_TRUE(parseJson(formatJsonLine(r)).ok());
  EXPECT_EQ(formatAdaptiveRecompute(r),
            "adaptive recompute at step 12: expert activations recomputed on "
            "rank 0: 4 of 4, rank 1: 0 of 4, rank 3: 1 of 4");
  r.activationsKept.assign(10, 2);
  r.activationsRecomputed.assign(10, 0);
  EXPECT_EQ(formatAdaptiveRecompute(r).substr(
                formatAdaptiveRecompute(r).find("rank 7")),
            "rank 7: 0 of 2 (and 2 more ranks)");
}

// Hot-expert replication: each rank's MoE layer passes that replicated,
// in the JSON object after adaptive recompute's counts and on the log line
// (ranks without MoE layers left out).
TEST(ProgressLog, HotExpertReplicationByRank) {
  StepReport r;
  r.step = 4;
  r.loss = 2.5;
  r.lr = 0.001;
  r.gradNorm = 1.5;
  r.tokensPerSecond = 100;
  r.passesReplicated = {1, 1, 0};
  r.moePasses = {2, 2, 0};
  EXPECT_EQ(formatJsonLine(r),
            "{\"step\":4,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1.5,"
            "\"tokens_per_s\":100,\"experts_replicated\":[1,1,0]}");
  EXPECT_TRUE(parseJson(formatJsonLine(r)).ok());
  EXPECT_EQ(formatReplication(r),
            "hot-expert replication at step 4: on in MoE layer passes on "
            "rank 0: 1 of 2, rank 1: 1 of 2");
  r.activationsKept = {1, 2, 0};
  r.activationsRecomputed = {1, 0, 0};
  EXPECT_EQ(formatJsonLine(r),
            "{\"step\":4,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1.5,"
            "\"tokens_per_s\":100,\"experts_recomputed\":[1,0,0],"
            "\"experts_replicated\":[1,1,0]}");
}

TEST(MemoryReport, HumanUnits) {
  plan::MemoryReport m;
  m.set_parameter_bytes(1 << 20);
  m.set_gradient_bytes(1 << 20);
  m.set_optimizer_bytes(2 << 20);
  m.set_input_bytes(4096);
  m.set_activation_peak_bytes(3584 * 1024);
  m.set_saved_activation_bytes(512);
  m.set_arena_bytes(uint64_t{8} << 20);
  EXPECT_EQ(formatMemoryReport(m),
            "memory per rank: parameters 1.00 MiB | gradients 1.00 MiB | "
            "optimizer state 2.00 MiB | inputs 4.00 KiB | activations peak "
            "3.50 MiB (saved 512 B) | arena 8.00 MiB");
  // A pipeline rank's report is its own stage's, and says so.
  EXPECT_EQ(formatMemoryReport(m, "fp32", 1).rfind(
                "memory per rank (pipeline rank 1): parameters 1.00 MiB", 0),
            0u);
  EXPECT_EQ(formatMemoryReport(m, "bf16", 0).rfind(
                "memory per rank (pipeline rank 0, bf16): parameters", 0),
            0u);
}

} // namespace
} // namespace braid
