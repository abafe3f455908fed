// Optimizer offload (plan.proto Tensor.host on PARAMETER and
// OPTIMIZER_STATE tensors, Plan.host_streams): the loader's rules for host
// parameters, host streams and f32 weight copies; the tiny model trained
// with its masters and moments on the host and AdamW on a host stream,
// bit for bit as without offload, through a checkpoint and a resume; and
// the same plan on a GPU (skipped without one).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/Trainer.h"
#include "test/unit/runtime/LoadChecks.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::expectRefused;
using test::idOf;
using test::kTinyCopyStream;
using test::kTinyHostStream;
using test::loadOnCpu;
using test::TinyModelOptions;

plan::Plan offloadPlan(TinyModelOptions o = {}) {
  o.optimizerOffload = true;
  return test::tinyModelPlan(o);
}

std::string ref(const plan::Plan &p, uint32_t id) {
  return absl::StrCat("plan.tensors[", id, "] (", p.tensors(id).name(), ")");
}

// The step program's first launch of `kernel`.
plan::Launch *firstLaunch(plan::Plan &p, const std::string &kernel,
                          int *index = nullptr) {
  for (plan::Program &program : *p.mutable_programs()) {
    if (program.kind() != plan::STEP)
      continue;
    for (int i = 0; i < program.instructions_size(); ++i) {
      plan::Instruction *inst = program.mutable_instructions(i);
      if (inst->has_launch() && inst->launch().kernel() == kernel) {
        if (index != nullptr)
          *index = i;
        return inst->mutable_launch();
      }
    }
  }
  ADD_FAILURE() << "no launch of " << kernel;
  return nullptr;
}

plan::Program &stepProgram(plan::Plan &p) {
  for (plan::Program &program : *p.mutable_programs())
    if (program.kind() == plan::STEP)
      return program;
  ADD_FAILURE() << "no step program";
  return *p.mutable_programs(0);
}

// --- The loader ----------------------------------------------------------

TEST(OptimizerOffload, TheOffloadPlanLoads) {
  const plan::Plan p = offloadPlan();
  absl::Status s = loadOnCpu(p);
  ASSERT_TRUE(s.ok()) << s;
  // The masters and moments are laid out from host offset 0, the host
  // transients after them; host_bytes covers both.
  const plan::Tensor &embed = p.tensors(idOf(p, "model.embed_tokens.weight"));
  EXPECT_TRUE(embed.host());
  EXPECT_EQ(embed.offset(), 0u);
  const plan::Tensor &last = p.tensors(idOf(p, "step_skipped.host"));
  EXPECT_TRUE(last.host());
  EXPECT_EQ(p.memory().host_bytes(), last.offset() + 64);
  EXPECT_FALSE(p.tensors(idOf(p, "model.embed_tokens.weight.grad")).host());
  absl::StatusOr<LoadedPlan> loaded = loadPlan(
      p.SerializeAsString(), test::testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->hostPersistent);
  EXPECT_TRUE(loaded->isHostStream(kTinyHostStream));
  EXPECT_FALSE(loaded->isHostStream(kTinyCopyStream));
  EXPECT_FALSE(loaded->isHostStream(0));
  EXPECT_EQ(loaded->imageOffset(embed.id()),
            p.memory().arena_bytes() + embed.offset());
  EXPECT_EQ(loaded->imageBytes(),
            p.memory().arena_bytes() + p.memory().host_bytes());
}

TEST(OptimizerOffload, RefusesAHostGradient) {
  plan::Plan p = offloadPlan();
  const uint32_t g = idOf(p, "lm_head.weight.grad");
  p.mutable_tensors(g)->set_host(true);
  expectRefused(p, absl::StrCat(ref(p, g),
                                " is a GRADIENT tensor on the host (host is "
                                "set): only ACTIVATION (activation offload), "
                                "PARAMETER and OPTIMIZER_STATE (optimizer "
                                "offload) tensors live in the host arena"));
  for (const char *name : {"tokens", "loss"}) {
    plan::Plan q = offloadPlan();
    const uint32_t id = idOf(q, name);
    q.mutable_tensors(id)->set_host(true);
    expectRefused(q, absl::StrCat(ref(q, id), " is a"));
    expectRefused(q, "tensor on the host (host is set)");
  }
}

TEST(OptimizerOffload, RefusesADeviceTensorInAHostStreamLaunch) {
  plan::Plan p = offloadPlan();
  int at = 0;
  plan::Launch *adamw = firstLaunch(p, "adamw", &at);
  const uint32_t grad = idOf(p, "model.embed_tokens.weight.grad");
  adamw->set_inputs(0, grad);
  expectRefused(p, absl::StrCat("instruction ", at, " (kernel adamw): reads ",
                                ref(p, grad),
                                ", a device tensor, on host stream ",
                                kTinyHostStream,
                                ": launches on a host stream "
                                "(plan.host_streams) run on the host CPU and "
                                "read and write host tensors only"));
  // Writing one is refused alike.
  plan::Plan w = offloadPlan();
  plan::Launch *writes = firstLaunch(w, "adamw", &at);
  const uint32_t copy = idOf(w, "model.embed_tokens.weight.copy");
  writes->set_outputs(0, copy);
  expectRefused(w, absl::StrCat("(kernel adamw): writes ", ref(w, copy),
                                ", a device tensor, on host stream "));
}

TEST(OptimizerOffload, RefusesAHostTensorInADeviceLaunchOtherThanCopy) {
  plan::Plan p = offloadPlan();
  plan::Launch *embedding = firstLaunch(p, "embedding");
  const uint32_t master = idOf(p, "model.embed_tokens.weight");
  embedding->set_inputs(0, master);
  expectRefused(p, absl::StrCat("(kernel embedding): reads ", ref(p, master),
                                ", a host tensor (host is set): only launches "
                                "on host streams (plan.host_streams) and "
                                "launches of kernel \"copy\" read or write "
                                "host tensors"));
  // AdamW moved to the copy stream, a device stream, is refused too.
  plan::Plan moved = offloadPlan();
  int at = 0;
  firstLaunch(moved, "adamw", &at);
  stepProgram(moved).mutable_instructions(at)->set_stream(kTinyCopyStream);
  expectRefused(moved, "(kernel adamw): reads ");
  expectRefused(moved, ", a host tensor (host is set)");
}

TEST(OptimizerOffload, RefusesWhatIsNoLaunchOnAHostStream) {
  // A collective on the host stream.
  plan::Plan p = offloadPlan();
  plan::Instruction *c = stepProgram(p).add_instructions();
  c->set_stream(kTinyHostStream);
  c->mutable_collective()->set_kind(plan::ALL_REDUCE_SUM);
  c->mutable_collective()->set_axis(plan::DP);
  c->mutable_collective()->add_tensors(p.grad_norm_tensor());
  expectRefused(p, absl::StrCat(": a collective on host stream ",
                                kTinyHostStream,
                                ": only launches, records, waits, repeats "
                                "and marks run on a host stream "
                                "(plan.host_streams)"));
  // A readback, a send and a stage.
  plan::Plan r = offloadPlan();
  plan::Instruction *rb = stepProgram(r).add_instructions();
  rb->set_stream(kTinyHostStream);
  rb->mutable_readback()->set_tensor(r.loss_tensor());
  rb->mutable_readback()->set_slot(0);
  expectRefused(r, "a readback on host stream ");
  plan::Plan s = offloadPlan();
  plan::Instruction *send = stepProgram(s).add_instructions();
  send->set_stream(kTinyHostStream);
  send->mutable_send()->set_tensor(s.loss_tensor());
  send->mutable_send()->set_peer_offset(1);
  expectRefused(s, "a send on host stream ");
  plan::Plan st = offloadPlan();
  plan::Instruction *stage = stepProgram(st).add_instructions();
  stage->set_stream(kTinyHostStream);
  stage->mutable_stage()->set_tensor(idOf(st, "tokens"));
  expectRefused(st, "a stage on host stream ");
}

TEST(OptimizerOffload, RefusesHostStreamZeroOutOfRangeOrTwice) {
  plan::Plan zero = offloadPlan();
  zero.add_host_streams(0);
  expectRefused(zero, "plan.host_streams[1] is stream 0, the compute stream");
  plan::Plan beyond = offloadPlan();
  beyond.set_host_streams(0, beyond.num_streams());
  expectRefused(beyond, absl::StrCat("plan.host_streams[0] is stream ",
                                     beyond.num_streams(),
                                     ", which is not below plan.num_streams "
                                     "= ",
                                     beyond.num_streams()));
  plan::Plan twice = offloadPlan();
  twice.add_host_streams(kTinyHostStream);
  expectRefused(twice, absl::StrCat("plan.host_streams[1] is stream ",
                                    kTinyHostStream,
                                    ", which is also plan.host_streams[0]"));
  // Without host streams, the host AdamW is a non-copy launch on a device
  // stream.
  plan::Plan none = offloadPlan();
  none.clear_host_streams();
  expectRefused(none, "(kernel adamw): reads ");
}

TEST(OptimizerOffload, F32WeightCopiesAreForHostParametersOnly) {
  // The offload plan's f32 copies of host parameters load (FP32 plan, and
  // a BF16 one).
  plan::Plan bf16 = offloadPlan();
  bf16.mutable_train()->set_precision(plan::TrainConfig::BF16);
  EXPECT_TRUE(loadOnCpu(bf16).ok()) << loadOnCpu(bf16);
  // An f32 copy of a device parameter: refused in an FP32 plan...
  plan::Plan fp32 = offloadPlan();
  const uint32_t norm = idOf(fp32, "model.norm.weight");
  const uint32_t normCopy = idOf(fp32, "model.norm.weight.copy");
  fp32.mutable_tensors(norm)->set_host(false);
  expectRefused(fp32, absl::StrCat(ref(fp32, normCopy),
                                   " is a WEIGHT_COPY but plan.train.precision "
                                   "is FP32: only BF16 plans and host "
                                   "parameters (optimizer offload) have weight "
                                   "copies of whole parameters"));
  // ...and in a BF16 plan, where a device parameter's copy is bf16.
  plan::Plan mixed = offloadPlan();
  mixed.mutable_train()->set_precision(plan::TrainConfig::BF16);
  mixed.mutable_tensors(norm)->set_host(false);
  expectRefused(mixed, absl::StrCat(ref(mixed, norm),
                                    ": param.compute_copy names ",
                                    ref(mixed, normCopy),
                                    ", f32 [16]: it must be bf16 [16] like "
                                    "the parameter"));
}

TEST(OptimizerOffload, HostStreamLaunchesResolveToCpuKernelsOnACudaPlan) {
  if (!haveCudaBackend())
    GTEST_SKIP() << "this build has no CUDA backend";
  // Loading needs no GPU: the CUDA plan's host-stream launches get the CPU
  // kernels, every other launch the CUDA ones.
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(offloadPlan().SerializeAsString(), defaultKernelRegistry(),
               Device::kCUDA);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  int host = 0, device = 0;
  for (const LoadedProgram &program : loaded->programs)
    for (const LoadedInstruction &inst : program.instructions) {
      if (inst.kind != LoadedInstruction::Kind::kLaunch)
        continue;
      const bool onHost = loaded->isHostStream(inst.stream);
      EXPECT_EQ(inst.kernel->device, onHost ? Device::kCPU : Device::kCUDA)
          << inst.kernel->name << " on stream " << inst.stream;
      (onHost ? host : device) += 1;
    }
  EXPECT_EQ(host, 3);
  EXPECT_GT(device, 10);
}

// --- Training --------------------------------------------------------------

struct Trained {
  std::vector<double> losses;
  std::vector<float> norms;
  std::vector<std::vector<float>> state;
};

Trained train(Trainer &trainer, int steps) {
  Trained out;
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<StepResult> r = trainer.trainStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok())
      break;
    out.losses.push_back(r->loss);
    out.norms.push_back(r->gradNorm);
  }
  out.state = test::trainedState(trainer);
  return out;
}

TEST(OptimizerOffload, TrainsBitForBitAsWithoutOffload) {
  for (bool twoStreams : {false, true}) {
    SCOPED_TRACE(twoStreams ? "two streams" : "one compute stream");
    TinyModelOptions model;
    model.steps = 6;
    model.twoStreams = twoStreams;
    TrainerOptions options;
    options.numThreads = 2;
    auto plain = test::tinyTrainer(test::tinyModelPlan(model), options);
    auto offloaded = test::tinyTrainer(offloadPlan(model), options);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(offloaded, nullptr);
    const Trained a = train(*plain, 6);
    const Trained b = train(*offloaded, 6);
    ASSERT_EQ(a.losses.size(), 6u);
    EXPECT_EQ(a.losses, b.losses);
    EXPECT_EQ(a.norms, b.norms);
    EXPECT_EQ(a.state, b.state);
    // The loss falls: the host AdamW did update the weights compute reads.
    EXPECT_LT(b.losses.back(), b.losses.front());

    // readTensor reads a host master from the host arena, and the device
    // copy equals it after the step.
    const plan::Plan &p = offloaded->plan().proto;
    absl::StatusOr<std::vector<uint8_t>> master =
        offloaded->readTensor("lm_head.weight");
    absl::StatusOr<std::vector<uint8_t>> copy =
        offloaded->readTensor("lm_head.weight.copy");
    ASSERT_TRUE(master.ok() && copy.ok());
    EXPECT_EQ(*master, *copy);
    absl::StatusOr<absl::Span<float>> inPlace =
        offloaded->f32Tensor("lm_head.weight");
    ASSERT_TRUE(inPlace.ok()) << inPlace.status();
    EXPECT_EQ(std::memcmp(inPlace->data(), master->data(), master->size()),
              0);

    // Every host byte is touched by a copy or a host-stream launch.
    const DeviceStats stats = offloaded->device().stats();
    EXPECT_EQ(stats.hostArenaHighWater, p.memory().host_bytes());
    EXPECT_EQ(offloaded->device().hostArenaBytes(), p.memory().host_bytes());
    EXPECT_LE(stats.arenaHighWater, p.memory().arena_bytes());
  }
}

std::vector<char> fileBytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

TEST(OptimizerOffload, CheckpointsAndResumesBitExact) {
  const int kTotal = 6, kSplit = 3;
  TinyModelOptions model;
  model.steps = kTotal;
  model.transposedHead = true;
  TrainerOptions options;
  options.numThreads = 2;
  auto straight = test::tinyTrainer(offloadPlan(model), options);
  ASSERT_NE(straight, nullptr);
  const Trained all = train(*straight, kTotal);

  auto first = test::tinyTrainer(offloadPlan(model), options);
  ASSERT_NE(first, nullptr);
  const Trained head = train(*first, kSplit);
  for (int i = 0; i < kSplit; ++i)
    EXPECT_EQ(head.losses[i], all.losses[i]);
  absl::StatusOr<std::string> saved =
      first->saveCheckpoint(test::freshDir("offload-resume"));
  ASSERT_TRUE(saved.ok()) << saved.status();

  // The checkpoint's tensors are those the plan without offload saves.
  auto plain = test::tinyTrainer(test::tinyModelPlan(model), options);
  ASSERT_NE(plain, nullptr);
  train(*plain, kSplit);
  absl::StatusOr<std::string> plainSaved =
      plain->saveCheckpoint(test::freshDir("offload-resume-plain"));
  ASSERT_TRUE(plainSaved.ok()) << plainSaved.status();
  int compared = 0;
  for (const auto &entry : std::filesystem::directory_iterator(*saved)) {
    if (entry.path().extension() != ".safetensors")
      continue;
    const std::filesystem::path other =
        std::filesystem::path(*plainSaved) / entry.path().filename();
    EXPECT_EQ(fileBytes(entry.path()), fileBytes(other))
        << entry.path().filename();
    ++compared;
  }
  EXPECT_GT(compared, 0);

  TrainerOptions fresh = options;
  fresh.totalSteps = 0;
  auto second = test::tinyTrainer(offloadPlan(model), fresh);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<ResumeReport> from = second->resume(*saved);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(second->stepsDone(), kSplit);
  const Trained rest = train(*second, kTotal - kSplit);
  for (int i = kSplit; i < kTotal; ++i)
    EXPECT_EQ(rest.losses[i - kSplit], all.losses[i]) << "step " << i + 1;
  EXPECT_EQ(rest.state, all.state);

  // A checkpoint of the plan without offload resumes into the offload plan
  // too (the tensors are the same; only where they live differs).
  auto cross = test::tinyTrainer(offloadPlan(model), fresh);
  ASSERT_NE(cross, nullptr);
  absl::StatusOr<ResumeReport> crossFrom = cross->resume(*plainSaved);
  ASSERT_TRUE(crossFrom.ok()) << crossFrom.status();
  const Trained crossRest = train(*cross, kTotal - kSplit);
  EXPECT_EQ(crossRest.losses, rest.losses);
  EXPECT_EQ(crossRest.state, all.state);
}

// --- On a GPU -----------------------------------------------------------

std::unique_ptr<Trainer> cudaTrainer(const plan::Plan &plan, bool graphs) {
  absl::StatusOr<LoadedPlan> loaded = loadPlan(
      plan.SerializeAsString(), defaultKernelRegistry(), Device::kCUDA);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok())
    return nullptr;
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(test::shakespearePath(), TokenFormat::kText, 256);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok())
    return nullptr;
  TrainerOptions options;
  options.cudaGraphs = graphs;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(std::move(*loaded), std::move(*data), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? std::move(*trainer) : nullptr;
}

TEST(OptimizerOffload, CudaRunsTheHostAdamWOnItsHostStream) {
  if (absl::Status s = probeDevice(Device::kCUDA); !s.ok())
    GTEST_SKIP() << s;
  TinyModelOptions model;
  model.steps = 5;
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "CUDA graphs" : "eager");
    auto gpu = cudaTrainer(offloadPlan(model), graphs);
    auto plain = cudaTrainer(test::tinyModelPlan(model), graphs);
    ASSERT_NE(gpu, nullptr);
    ASSERT_NE(plain, nullptr);
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<StepResult> a = plain->trainStep();
      absl::StatusOr<StepResult> b = gpu->trainStep();
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      // The host AdamW is the CPU kernel, the device one CUDA's: close,
      // not necessarily equal.
      EXPECT_NEAR(a->loss, b->loss, 1e-3 * std::abs(a->loss)) << i;
    }
    // The device copy follows the host master, and the step's state came
    // back through the pinned host arena.
    absl::StatusOr<std::vector<uint8_t>> master =
        gpu->readTensor("lm_head.weight");
    absl::StatusOr<std::vector<uint8_t>> copy =
        gpu->readTensor("lm_head.weight.copy");
    ASSERT_TRUE(master.ok() && copy.ok());
    EXPECT_EQ(*master, *copy);
    const plan::Plan &p = gpu->plan().proto;
    EXPECT_EQ(gpu->device().stats().hostArenaHighWater,
              p.memory().host_bytes());
    if (graphs)
      EXPECT_GT(gpu->device().stats().graphReplays, 0);
    // A checkpoint and a resume on the GPU continue bit for bit.
    absl::StatusOr<std::string> saved = gpu->saveCheckpoint(
        test::freshDir(graphs ? "offload-gpu-graphs" : "offload-gpu"));
    ASSERT_TRUE(saved.ok()) << saved.status();
    auto again = cudaTrainer(offloadPlan(model), graphs);
    ASSERT_NE(again, nullptr);
    ASSERT_TRUE(again->resume(*saved).ok());
    EXPECT_EQ(*again->readTensor("lm_head.weight.copy"), *copy);
    EXPECT_EQ(*again->readTensor("lm_head.weight.exp_avg"),
              *gpu->readTensor("lm_head.weight.exp_avg"));
  }
}

} // namespace
} // namespace braid
