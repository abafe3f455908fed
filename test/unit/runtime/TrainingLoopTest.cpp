// The training run: reports, progress lines, the JSON log, periodic and
// final checkpoints, stopping early, stopping on a signal, never applying or
// saving a non-finite step, and one log line per step across a resume.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/Json.h"
#include "runtime/train/PeakFlops.h"
#include "runtime/train/ProgressLog.h"
#include "runtime/train/StopSignal.h"
#include "runtime/train/TrainingLoop.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using test::freshDir;
using test::tinyTrainer;

// A temporary stream whose text can be read back.
class Capture {
public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  FILE *get() { return file_; }
  std::string text() {
    std::fflush(file_);
    std::rewind(file_);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0)
      s.append(buf, n);
    return s;
  }

private:
  FILE *file_;
};

std::vector<std::string> lines(const std::string &path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

std::vector<std::string> dirNames(const std::string &root) {
  std::vector<std::string> out;
  for (const auto &e : fs::directory_iterator(root))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TrainingLoop, PrintsReportsProgressAndLog) {
  auto trainer = tinyTrainer();
  ASSERT_NE(trainer, nullptr);
  Capture out, err;
  RunOptions options;
  options.out = out.get();
  options.err = err.get();
  options.peakGflops = 50;
  options.logPath = freshDir("loop-log") + "/train.jsonl";
  absl::StatusOr<int> code = runTraining(*trainer, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(trainer->stepsDone(), 6);

  std::vector<std::string> printed = absl::StrSplit(out.text(), '\n');
  ASSERT_GE(printed.size(), 10u);
  EXPECT_EQ(printed[0],
            "plan tiny-model: llama, 8.21k parameters, 1 stream | batch 2 "
            "x 2 micro-batches x 8 tokens | " +
                std::to_string(trainer->numThreads()) + " threads");
  EXPECT_EQ(printed[1].rfind("memory per rank: parameters 32.1 KiB | "
                             "gradients 32.1 KiB | optimizer state 64.1 KiB",
                             0),
            0u)
      << printed[1];
  EXPECT_NE(printed[2].find("tinyshakespeare.txt' (text), 1115394 tokens, "
                            "139424 windows of 9"),
            std::string::npos)
      << printed[2];
  EXPECT_EQ(printed[3], "peak: 50.0 GFLOP/s (from --peak-gflops)");
  for (int s = 1; s <= 6; ++s) {
    const std::string &line = printed[3 + s];
    EXPECT_EQ(line.rfind("step    " + std::to_string(s) + "/6 | loss ", 0), 0u)
        << line;
    EXPECT_NE(line.find(" tok/s | MFU "), std::string::npos) << line;
    EXPECT_NE(line.find("% | ETA "), std::string::npos) << line;
  }
  EXPECT_EQ(err.text(), "");

  std::vector<std::string> log = lines(options.logPath);
  ASSERT_EQ(log.size(), 6u);
  for (size_t i = 0; i < log.size(); ++i) {
    absl::StatusOr<JsonValue> v = parseJson(log[i]);
    ASSERT_TRUE(v.ok()) << log[i];
    EXPECT_EQ(v->find("step")->text, std::to_string(i + 1));
    for (const char *key : {"loss", "lr", "grad_norm", "tokens_per_s"})
      EXPECT_NE(v->find(key), nullptr) << key;
  }
}

// The JSON losses of a log, in order.
std::vector<std::string> loggedLosses(const std::string &path) {
  std::vector<std::string> out;
  for (const std::string &line : lines(path))
    out.push_back(parseJson(line)->find("loss")->text);
  return out;
}

TEST(TrainingLoop, SavesPeriodicallyStopsEarlyAndResumesTheLog) {
  const std::string root = freshDir("loop-ckpt");
  const std::string logPath = root + "/../loop-ckpt.jsonl";
  RunOptions options;
  options.quiet = true;
  options.saveDir = root + "/ckpt";
  options.saveInterval = 2;
  options.stopAfter = 5;
  options.logPath = logPath;
  Capture out;
  options.out = out.get();
  auto trainer = tinyTrainer();
  absl::StatusOr<int> code = runTraining(*trainer, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(trainer->stepsDone(), 5);
  EXPECT_EQ(out.text(), ""); // quiet
  // Every second step, and the step the run stopped after.
  EXPECT_EQ(
      dirNames(options.saveDir),
      (std::vector<std::string>{"step-000002", "step-000004", "step-000005"}));
  EXPECT_EQ(lines(logPath).size(), 5u);

  // A new trainer resumes the latest checkpoint; the log continues.
  auto resumed = tinyTrainer();
  ASSERT_TRUE(resumed->resume(options.saveDir).ok());
  options.stopAfter = 0;
  ASSERT_EQ(*runTraining(*resumed, options), 0);
  EXPECT_EQ(dirNames(options.saveDir),
            (std::vector<std::string>{"step-000002", "step-000004",
                                      "step-000005", "step-000006"}));

  // The same losses as an uninterrupted run.
  const std::string straightLog = root + "/straight.jsonl";
  RunOptions straight;
  straight.quiet = true;
  straight.logPath = straightLog;
  auto whole = tinyTrainer();
  ASSERT_EQ(*runTraining(*whole, straight), 0);
  EXPECT_EQ(loggedLosses(logPath), loggedLosses(straightLog));
}

TEST(TrainingLoop, StopsCleanlyOnSigterm) {
  // A kernel raises SIGTERM during step 2; the step completes, a checkpoint
  // is saved, and the run reports 128 + SIGTERM.
  plan::Plan plan = test::tinyModelPlan();
  plan::Launch *stop =
      plan.mutable_programs(0)->add_instructions()->mutable_launch();
  stop->set_kernel("test.stop");
  *stop->add_attrs() = test::intAttr("step", 2);
  auto trainer = tinyTrainer(plan);
  ASSERT_NE(trainer, nullptr);
  installStopHandlers(true);
  clearStopSignal();
  RunOptions options;
  options.quiet = true;
  options.saveDir = freshDir("loop-signal");
  Capture err;
  options.err = err.get();
  absl::StatusOr<int> code = runTraining(*trainer, options);
  clearStopSignal();
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_EQ(trainer->stepsDone(), 2);
  EXPECT_EQ(dirNames(options.saveDir),
            (std::vector<std::string>{"step-000002"}));
  EXPECT_EQ(err.text(), "braid-run: stopped by SIGTERM after step 2 of 6; "
                        "resume with --resume " +
                            options.saveDir + "/step-000002\n");
}

// The tiny plan with a NaN written into the LM head's gradient during
// step `step`, after every backward kernel.
plan::Plan poisonedAt(int64_t step) {
  plan::Plan plan = test::tinyModelPlan();
  uint32_t grad = 0;
  for (const plan::Tensor &t : plan.tensors())
    if (t.name() == "lm_head.weight.grad")
      grad = t.id();
  // Just before the optimizer's grad_norm, after every micro-batch.
  auto *insts = plan.mutable_programs(0)->mutable_instructions();
  plan::Launch *poison = insts->Add()->mutable_launch();
  poison->set_kernel("test.poison");
  poison->add_outputs(grad);
  *poison->add_attrs() = test::intAttr("step", step);
  int at = insts->size() - 1;
  while (at > 0 && !(insts->Get(at - 1).has_launch() &&
                     insts->Get(at - 1).launch().kernel() == "grad_norm"))
    insts->SwapElements(at, at - 1), --at;
  insts->SwapElements(at, at - 1);
  return plan;
}

TEST(TrainingLoop, NeverAppliesOrSavesANonFiniteStep) {
  plan::Plan plan = test::tinyModelPlan();
  // Weights blow up after the first update; the loss follows.
  plan.mutable_train()->set_lr(1e30);
  plan.mutable_train()->set_min_lr(0);
  plan.mutable_train()->set_grad_clip(0);
  plan.mutable_train()->set_warmup_steps(0);
  for (plan::Instruction &inst :
       *plan.mutable_programs(0)->mutable_instructions()) {
    if (!inst.has_launch())
      continue;
    for (plan::Attr &a : *inst.mutable_launch()->mutable_attrs())
      if (a.name() == "grad_clip")
        a.set_f(0);
  }
  auto trainer = tinyTrainer(plan);
  RunOptions options;
  options.quiet = true;
  options.saveDir = freshDir("loop-nonfinite");
  options.saveInterval = 1;
  Capture err;
  options.err = err.get();
  absl::StatusOr<int> code = runTraining(*trainer, options);
  ASSERT_FALSE(code.ok());
  const std::string message(code.status().message());
  const int64_t bad = trainer->stepsDone();
  ASSERT_GE(bad, 2);
  EXPECT_NE(message.find(absl::StrCat("step ", bad, ": the loss is ")),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("not both finite, so its update was not applied; "
                         "stopping. The last checkpoint, all of whose values "
                         "are finite, is " +
                         options.saveDir + "/" + checkpointDirName(bad - 1)),
            std::string::npos)
      << message;
  // No step at or after the bad one was saved, and each saved one loads.
  EXPECT_EQ(dirNames(options.saveDir).back(), checkpointDirName(bad - 1));
  for (const std::string &dir : dirNames(options.saveDir))
    EXPECT_TRUE(readCheckpoint(options.saveDir + "/" + dir, trainer->plan()).ok())
        << dir;
  // The state in memory is still finite: the update was refused on the
  // device.
  for (const std::vector<float> &t : test::trainedState(*trainer))
    for (float v : t)
      ASSERT_TRUE(std::isfinite(v));
}

TEST(TrainingLoop, SkipsUpToTheAllowedNonFiniteSteps) {
  // Step 2's gradient is NaN: with --skip-nonfinite 1 the step is skipped
  // and logged, and the run goes on to its end.
  auto trainer = tinyTrainer(poisonedAt(2));
  RunOptions options;
  options.quiet = true;
  options.skipNonfinite = 1;
  options.logPath = freshDir("loop-skip") + "/log.jsonl";
  Capture err;
  options.err = err.get();
  absl::StatusOr<int> code = runTraining(*trainer, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(trainer->stepsDone(), 6);
  EXPECT_EQ(trainer->skippedSteps(), 1);
  EXPECT_NE(err.text().find("braid-run: step 2: the loss is "),
            std::string::npos)
      << err.text();
  EXPECT_NE(err.text().find("skipped (1 of 1 allowed by --skip-nonfinite)"),
            std::string::npos);
  std::vector<std::string> log = lines(options.logPath);
  ASSERT_EQ(log.size(), 6u);
  EXPECT_NE(log[1].find("\"grad_norm\":null,\"tokens_per_s\":"),
            std::string::npos)
      << log[1];
  EXPECT_NE(log[1].find(",\"skipped\":true}"), std::string::npos);
  EXPECT_EQ(log[2].find("skipped"), std::string::npos);

  // A skipped step leaves parameters and moments as they were, and the
  // next update is AdamW's second, not its third.
  auto manual = tinyTrainer(poisonedAt(2));
  ASSERT_TRUE(manual->trainStep().ok());
  std::vector<std::vector<float>> afterOne = test::trainedState(*manual);
  absl::StatusOr<StepResult> second = manual->trainStep();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->skipped);
  EXPECT_EQ(test::trainedState(*manual), afterOne);
  EXPECT_EQ(manual->dataCursor(), 8); // the data of step 2 was consumed

  // Without the allowance the run stops at step 2 and says there is no
  // checkpoint to go back to.
  auto strict = tinyTrainer(poisonedAt(2));
  RunOptions none;
  none.quiet = true;
  none.err = err.get();
  code = runTraining(*strict, none);
  ASSERT_FALSE(code.ok());
  EXPECT_NE(std::string(code.status().message())
                .find("No checkpoint was saved in this run"),
            std::string::npos)
      << code.status();
  EXPECT_EQ(strict->stepsDone(), 2);
}

TEST(TrainingLoop, ResumedLogKeepsOneLinePerStep) {
  // Saved at step 2, killed after step 4: the resumed run redoes 3 and 4,
  // and the log holds each step once.
  std::string dir = freshDir("loop-relog");
  auto first = tinyTrainer();
  RunOptions options;
  options.quiet = true;
  options.logPath = dir + "/log.jsonl";
  options.saveDir = dir + "/ckpt";
  options.stopAfter = 2;
  ASSERT_TRUE(runTraining(*first, options).ok());
  options.saveDir.clear();
  options.stopAfter = 4;
  ASSERT_TRUE(runTraining(*first, options).ok());
  ASSERT_EQ(lines(options.logPath).size(), 4u);
  {
    std::ofstream torn(options.logPath, std::ios::app);
    torn << "{\"step\":5,\"lo"; // a write the crash cut short
  }

  auto second = tinyTrainer();
  ASSERT_TRUE(second->resume(dir + "/ckpt").ok());
  options.stopAfter = 0;
  ASSERT_TRUE(runTraining(*second, options).ok());
  std::vector<std::string> log = lines(options.logPath);
  ASSERT_EQ(log.size(), 6u);
  for (size_t i = 0; i < log.size(); ++i)
    EXPECT_EQ(log[i].rfind(absl::StrCat("{\"step\":", i + 1, ","), 0), 0u)
        << log[i];
}

// The tiny plan with an offload at the end of its step: the norm weight
// copied into host tensor "norm.host" at host offset 0, in a host arena of
// `hostBytes` (the tensor's 64 bytes, or more: a plan whose prediction the
// run does not reach).
plan::Plan offloadingTinyPlan(uint64_t hostBytes) {
  plan::Plan p = test::tinyModelPlan();
  const plan::Tensor *norm = nullptr;
  for (const plan::Tensor &t : p.tensors())
    if (t.name() == "model.norm.weight")
      norm = &t;
  EXPECT_NE(norm, nullptr);
  const uint32_t normId = norm->id();
  plan::Tensor *host = p.add_tensors();
  host->set_id(p.tensors_size() - 1);
  host->set_name("norm.host");
  *host->mutable_shape() = p.tensors(normId).shape();
  host->set_dtype(plan::F32);
  host->set_kind(plan::ACTIVATION);
  host->set_size_bytes(p.tensors(normId).size_bytes());
  host->set_host(true);
  p.mutable_memory()->set_host_bytes(hostBytes);
  for (plan::Program &program : *p.mutable_programs())
    if (program.kind() == plan::STEP) {
      plan::Instruction *copy = program.add_instructions();
      copy->mutable_launch()->set_kernel("copy");
      copy->mutable_launch()->add_inputs(normId);
      copy->mutable_launch()->add_outputs(host->id());
    }
  return p;
}

TEST(TrainingLoop, ReportsTheHostArenaAndItsHighWaterMark) {
  auto trainer = tinyTrainer(offloadingTinyPlan(64));
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->device().hostArenaBytes(), 64u);
  Capture out, err;
  RunOptions options;
  options.out = out.get();
  options.err = err.get();
  options.peakGflops = 50;
  ASSERT_TRUE(runTraining(*trainer, options).ok());
  const std::string text = out.text();
  EXPECT_NE(text.find(" | host arena 64 B, "), std::string::npos) << text;
  EXPECT_NE(text.find(" bytes allocated (and 64 in the host arena)\n"),
            std::string::npos)
      << text;
  // The device arena's mark is the plan's, as without the host tensor.
  const uint64_t arena = trainer->plan().proto.memory().arena_bytes();
  EXPECT_NE(text.find(absl::StrCat("\narena high-water mark: ", arena,
                                   " bytes measured, ", arena,
                                   " planned (equal)\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nhost arena high-water mark: 64 bytes measured, 64 "
                      "planned (equal)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(err.text(), "");

  // A plan that predicts more than the run touches: every rank warns.
  auto over = tinyTrainer(offloadingTinyPlan(128));
  ASSERT_NE(over, nullptr);
  Capture out2, err2;
  options.out = out2.get();
  options.err = err2.get();
  options.quiet = true;
  ASSERT_TRUE(runTraining(*over, options).ok());
  EXPECT_EQ(out2.text().find("high-water"), std::string::npos);
  EXPECT_EQ(err2.text(), "braid-run: warning: rank 0 touched 64 bytes of its "
                         "host arena, the plan predicted 128\n");
}

TEST(TrainingLoop, SaysNothingOfAHostArenaThePlanLacks) {
  auto trainer = tinyTrainer();
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->device().hostArenaBytes(), 0u);
  Capture out, err;
  RunOptions options;
  options.out = out.get();
  options.err = err.get();
  options.peakGflops = 50;
  ASSERT_TRUE(runTraining(*trainer, options).ok());
  EXPECT_EQ(out.text().find("host arena"), std::string::npos) << out.text();
  EXPECT_NE(out.text().find("\narena high-water mark: "), std::string::npos);
}

TEST(TrainingLoop, ProgressLogHelpers) {
  EXPECT_EQ(logLinesThrough("{\"step\":1,\"loss\":2}\n{\"step\":2,\"loss\":1}\n"
                            "{\"step\":3,\"loss\":0}\n{\"step\":4,",
                            2),
            "{\"step\":1,\"loss\":2}\n{\"step\":2,\"loss\":1}\n");
  EXPECT_EQ(logLinesThrough("garbage\n{\"step\":x}\n", 5), "");
}

TEST(TrainingLoop, MeasuresTheSgemmPeak) {
  PeakMeasurement m = measureSgemmPeak(0.05);
  EXPECT_EQ(m.size, 512);
  EXPECT_GE(m.products, 1);
  // Any machine this runs on does more than a tenth of a GFLOP/s, and none
  // does a PFLOP/s on the CPU.
  EXPECT_GT(m.gflops, 0.1);
  EXPECT_LT(m.gflops, 1e6);
}

TEST(TrainingLoop, ReportsAnUnwritableLog) {
  auto trainer = tinyTrainer();
  RunOptions options;
  options.quiet = true;
  options.logPath = "/nonexistent/dir/log.jsonl";
  absl::StatusOr<int> code = runTraining(*trainer, options);
  ASSERT_FALSE(code.ok());
  EXPECT_NE(std::string(code.status().message())
                .find("cannot open the log file '/nonexistent/dir/log.jsonl'"),
            std::string::npos);
  EXPECT_EQ(trainer->stepsDone(), 0);
}

} // namespace
} // namespace braid
