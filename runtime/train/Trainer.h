// Training a loaded plan in-process: the arena, the executor, the data and
// the optimizer-step bookkeeping, without any printing. braid-run drives it
// through runTraining (TrainingLoop.h); tests drive it directly.
//
// One optimizer step t (1-based) is: for each micro-batch m, fill the INPUT
// tensors with samples cursor + m * B .. cursor + m * B + B - 1, run
// "micro_batch" with KernelContext{t, m, lr(t), seed} and read the loss; then
// run "optimizer" with the same context and read the gradient norm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/ThreadPool.h"
#include "runtime/data/DataLoader.h"
#include "runtime/device/cpu/CpuArena.h"
#include "runtime/executor/Executor.h"
#include "runtime/plan/PlanLoader.h"
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
};

struct StepResult {
  int64_t step = 0; // the step just completed (1-based)
  double loss = 0;  // mean of the micro-batch losses
  double lr = 0;
  float gradNorm = 0;
};

class Trainer {
public:
  // Allocates the arena, binds the executor, and initialises the parameters
  // (docs/numerics.md). The plan's kernel registry must outlive the trainer.
  // Fails when the arena cannot be allocated or the data is too short for
  // one window.
  static absl::StatusOr<std::unique_ptr<Trainer>>
  create(LoadedPlan plan, TokenData data, const TrainerOptions &options);

  const LoadedPlan &plan() const { return plan_; }
  // Optimizer steps completed so far.
  int64_t stepsDone() const { return stepsDone_; }
  int64_t totalSteps() const { return totalSteps_; }
  // Samples consumed so far.
  int64_t dataCursor() const { return cursor_; }
  // Tokens trained per optimizer step: B * M * S.
  int64_t tokensPerStep() const;
  // The learning rate of step `step` (1-based).
  double learningRate(int64_t step) const { return schedule_.at(step); }
  int numThreads() const { return pool_.size(); }
  const DataLoader &data() const { return data_; }

  // Times every kernel launch into `profile` from now on (null to stop).
  void setProfile(KernelProfile *profile) { executor_->setProfile(profile); }

  // Forward and backward of every micro-batch of the next step, leaving the
  // accumulated gradients in the arena; returns the mean loss.
  // FailedPrecondition when called twice without optimizerStep() between,
  // or when all totalSteps() steps are done.
  absl::StatusOr<double> runMicroBatches();
  // Clipping and AdamW for the step whose gradients runMicroBatches() left;
  // returns the gradient norm. FailedPrecondition without them.
  absl::StatusOr<float> optimizerStep();
  // runMicroBatches() then optimizerStep().
  absl::StatusOr<StepResult> trainStep();

  // The bytes of the tensor called `name`; NotFound when the plan has none.
  absl::StatusOr<absl::Span<uint8_t>> tensorBytes(std::string_view name);
  // The same for an f32 tensor; InvalidArgument for another dtype.
  absl::StatusOr<absl::Span<float>> f32Tensor(std::string_view name);

  // Saves the state after stepsDone() steps under `rootDir` and returns the
  // checkpoint directory. FailedPrecondition between runMicroBatches() and
  // optimizerStep().
  absl::StatusOr<std::string> saveCheckpoint(const std::string &rootDir) const;
  // Restores the state saved in `dir` (a checkpoint directory, or a
  // directory of them, whose latest is used) and returns the checkpoint
  // directory read. Refuses a checkpoint of another plan or seed, or one
  // saved with the other shuffle setting, leaving the trainer unchanged.
  absl::StatusOr<std::string> resume(const std::string &dir);

private:
  Trainer(LoadedPlan plan, DataLoader data, const TrainerOptions &options,
          int64_t totalSteps);
  KernelContext context(int64_t step, int64_t microBatch);
  void fillInputs(int64_t firstSample);
  float readScalar(uint32_t id) const;

  LoadedPlan plan_;
  DataLoader data_;
  ThreadPool pool_;
  CpuArena arena_;
  std::unique_ptr<Executor> executor_;
  bool explicitTotal_;
  bool shuffle_;
  int64_t totalSteps_;
  LrSchedule schedule_;
  int64_t stepsDone_ = 0;
  int64_t cursor_ = 0;
  // runMicroBatches() ran and optimizerStep() has not yet.
  bool gradientsPending_ = false;
};

} // namespace braid
