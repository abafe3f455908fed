// Training a loaded plan in-process: the device (its arena and programs), the
// data and the optimizer-step bookkeeping, without any printing. braid-run
// drives it through runTraining (TrainingLoop.h); tests drive it directly.
//
// One optimizer step t (1-based) is: for each micro-batch m, stage the
// inputs of samples cursor + g * B .. cursor + g * B + B - 1 of global
// micro-batch g = m * DP + d (d: this rank's data-parallel coordinate; a
// single rank has DP = 1, d = 0, g = m); run the plan's
// STEP program once with StepValues{t, lr(t), seed}; read back every
// micro-batch's loss, the gradient norm and whether the optimizer applied
// the update: a step whose loss or gradient norm is not finite is refused
// on the device (the plan's step_guard), so the parameters and moments
// stay as they were. A plan with an INIT program (BF16 plans: it casts the
// masters to their weight copies) has it run once after the parameters
// are initialised, and again after every resume.
//
// A pipeline rank runs its stage's plan with the same inputs (it stages
// those its plan has), and the losses it reports are the loss stage's,
// passed on over the PP group; the gradient norm and the skipped flag its
// own plan reads back are already the whole pipeline's.
//
// Every byte goes through the DeviceBackend (runtime/device), so the same
// code trains on the CPU and on a GPU; the plan's device (LoadedPlan::device)
// chooses which.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/ThreadPool.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/comm/Ranks.h"
#include "runtime/data/DataLoader.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/WholeTensors.h"
#include "runtime/train/LrSchedule.h"

namespace braid {

struct TrainerOptions {
  // Steps of the whole run, which shape the LR schedule. 0: the plan's
  // train.steps, or on resume the total the checkpoint was saved with.
  int64_t totalSteps = 0;
  // Visit the data windows in a seeded random order per epoch.
  bool shuffle = false;
  // Kernel threads; 0: ThreadPool::defaultThreadCount().
  int numThreads = 0;
  // CUDA plans: replay programs as CUDA graphs after their first run.
  bool cudaGraphs = true;
  // The run's ranks (runtime/comm/Ranks.h), which must outlive the
  // trainer; null for a single-rank run. Data parallel ranks each train
  // their share of every global batch (see the top of this file).
  const Ranks *ranks = nullptr;
};

struct StepResult {
  int64_t step = 0; // the step just completed (1-based)
  double loss = 0;  // mean of the losses of every rank's micro-batches
  double lr = 0;
  float gradNorm = 0;
  // The loss or the gradient norm was not finite, so nothing was updated.
  bool skipped = false;
  // Adaptive recompute (docs/moe.md), by world rank: the experts' gate and
  // up activations (one per MoE layer and micro-batch each) the rank kept
  // for the backward, and those it recomputed. Empty without it.
  std::vector<int64_t> activationsKept;
  std::vector<int64_t> activationsRecomputed;
  // Hot-expert replication (docs/moe.md), by world rank: the MoE layer
  // passes (one per layer and micro-batch, forward; with moe-full recompute
  // the backward decides again and counts too) in which the rank's group
  // replicated its hot experts, and all its MoE layer passes. Empty
  // without it.
  std::vector<int64_t> passesReplicated;
  std::vector<int64_t> moePasses;
};

// What resume() restored, and what it changed with the user's leave.
struct ResumeReport {
  std::string dir; // the checkpoint directory read
  // One line per setting that differs from the checkpoint's
  // ("train.lr: 0.003 -> 0.001"), including the run length.
  std::vector<std::string> changes;
};

class Trainer {
public:
  // Creates the device of plan.device (allocating the arena and binding the
  // programs), initialises the parameters (docs/numerics.md) and runs the
  // INIT program when the plan has one. The plan's kernel registry must
  // outlive the trainer. Fails when the device or the arena is unavailable
  // or the data is too short for one window. A pipeline plan trains the
  // stage of this rank's PP coordinate (options.ranks, which a pipeline
  // always has), and plan() is then that stage's effective plan.
  static absl::StatusOr<std::unique_ptr<Trainer>>
  create(LoadedPlan plan, TokenData data, const TrainerOptions &options);

  const LoadedPlan &plan() const { return plan_; }
  // Optimizer steps completed so far.
  int64_t stepsDone() const { return stepsDone_; }
  int64_t totalSteps() const { return totalSteps_; }
  // Samples consumed so far.
  int64_t dataCursor() const { return cursor_; }
  // Steps not applied because they were not finite, over the whole run
  // (those before a resume included).
  int64_t skippedSteps() const { return skippedSteps_; }
  // The checkpoint most recently saved or resumed from; empty when none.
  // Every checkpoint holds finite values only.
  const std::string &lastCheckpoint() const { return lastCheckpoint_; }
  // The ranks of the run (1 without a launcher).
  int64_t worldSize() const { return ranks_ ? ranks_->worldSize() : 1; }
  int64_t worldRank() const { return ranks_ ? ranks_->rank() : 0; }
  // The pipeline's ranks and this rank's PP coordinate, whose stage plan
  // plan() is (1 and 0 for a plan that is no pipeline).
  int64_t pipelineSize() const { return ppSize_; }
  int64_t pipelineRank() const { return ppRank_; }
  // Tokens trained per optimizer step, over every rank: B * M * DP * S.
  int64_t tokensPerStep() const;
  // The learning rate of step `step` (1-based).
  double learningRate(int64_t step) const { return schedule_.at(step); }
  // The device's host threads (on the CPU, its kernel threads).
  int numThreads() const { return numThreads_; }
  const DataLoader &data() const { return data_; }
  DeviceBackend &device() { return *device_; }
  const DeviceBackend &device() const { return *device_; }
  const DeviceInfo &deviceInfo() const { return device_->info(); }

  // Times every kernel launch into `profile` from now on (null to stop).
  void setProfile(KernelProfile *profile) { device_->setProfile(profile); }
  // Times the step program's marks into `trace` from now on (null to stop).
  void setTrace(ScheduleTrace *trace) { device_->setTrace(trace); }

  // The next optimizer step: stages every micro-batch's inputs, runs the
  // plan's STEP program once (forward and backward of each micro-batch,
  // then clipping and AdamW unless the loss or the gradient norm is not
  // finite) and reads back its losses and norm. The step counts as done
  // either way. Its gradients stay in the arena until the next step starts.
  // FailedPrecondition when all totalSteps() steps are done.
  absl::StatusOr<StepResult> trainStep();

  // Whether the run stops before its next step, agreed by every rank so
  // that they all stop after the same one: `localSignal` (a signal this
  // rank received, or 0), or a signal another rank received. Single rank:
  // `localSignal` itself.
  absl::StatusOr<int> agreeOnStop(int localSignal);

  // The bytes of the tensor called `name`, in place (a host tensor's in the
  // host arena); NotFound when the plan has none, FailedPrecondition when
  // its arena is not host memory callers may touch (a GPU: use
  // readTensor).
  absl::StatusOr<absl::Span<uint8_t>> tensorBytes(std::string_view name);
  // The same for an f32 tensor; InvalidArgument for another dtype.
  absl::StatusOr<absl::Span<float>> f32Tensor(std::string_view name);
  // A copy of the bytes of the tensor called `name`, on any device, from
  // whichever arena it lives in.
  absl::StatusOr<std::vector<uint8_t>> readTensor(std::string_view name);

  // Saves the state after stepsDone() steps under `rootDir`, laid out as
  // `layout` says, and returns the checkpoint directory.
  // An empty rootDir writes nothing: a rank that only lends its shards to
  // rank 0's checkpoint (every rank calls it at the same step).
  absl::StatusOr<std::string>
  saveCheckpoint(const std::string &rootDir,
                 const CheckpointLayout &layout = {});
  // Restores the state saved in `dir` (a checkpoint directory, or a
  // directory of them, whose latest is used). Refuses, leaving the trainer
  // unchanged, a damaged or inconsistent checkpoint (readCheckpoint), one
  // saved with the other shuffle setting, and one whose plan identity
  // differs from this plan's in a field not in `allowedChanges` (full field
  // names, RunIdentity.h), naming every such field. An explicit
  // TrainerOptions::totalSteps allows train.steps to differ: the run length
  // is then the option's.
  absl::StatusOr<ResumeReport>
  resume(const std::string &dir,
         const std::set<std::string> &allowedChanges = {});

private:
  Trainer(LoadedPlan plan, DataLoader data, const TrainerOptions &options,
          int64_t totalSteps);
  StepValues values(int64_t step) const;
  // Sums `n` values over every rank of the mesh, in place.
  absl::Status sumOverRanks(int32_t *values, size_t n);
  // Fills `result`'s adaptive recompute and replication counts from every
  // rank's kernels.
  absl::Status gatherMoeChoices(StepResult &result);
  // Stages micro-batch `microBatch`'s inputs, from sample `firstSample` on.
  absl::Status fillInputs(int64_t microBatch, int64_t firstSample);
  // Writes the initial parameters and runs INIT.
  absl::Status initialise();
  // Runs INIT when the plan has it (after initialisation or a restore).
  absl::Status runInit();
  // The persistent tensors a checkpoint holds, copied into (or out of) a
  // host image of the arena laid out like it; only those bytes are valid.
  absl::Status copyCheckpointTensors(uint8_t *image, bool toDevice);

  LoadedPlan plan_;
  DataLoader data_;
  std::unique_ptr<DeviceBackend> device_;
  int numThreads_ = 0;
  bool explicitTotal_;
  bool shuffle_;
  int64_t totalSteps_;
  LrSchedule schedule_;
  int64_t stepsDone_ = 0;
  int64_t cursor_ = 0;
  int64_t skippedSteps_ = 0;
  std::string lastCheckpoint_;
  const Ranks *ranks_ = nullptr;
  // This rank's mesh coordinates (all 0 without ranks): which part of each
  // sharded tensor it holds.
  MeshCoords coords() const {
    return ranks_ ? ranks_->coords() : MeshCoords{};
  }
  // The data-parallel size and this rank's place in it.
  int64_t dpSize_ = 1, dpRank_ = 0;
  // The pipeline's size, this rank's place in it, and the PP coordinate
  // whose plan reads the losses back.
  int64_t ppSize_ = 1, ppRank_ = 0, lossStage_ = 0;
  // Checkpoints of sharded tensors, and a pipeline's, go through an image
  // of the whole model's tensors; null when neither.
  std::unique_ptr<WholeTensors> whole_;
  // fillInputs' scratch for the data a pipeline rank does not stage.
  std::vector<int32_t> unstaged_;
};

} // namespace braid
