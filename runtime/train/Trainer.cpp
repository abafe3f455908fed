#include "runtime/train/Trainer.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/train/ParameterInit.h"

namespace braid {
namespace {

// Sample indices of the whole run must fit in 64 bits.
absl::Status checkRunLength(const plan::TrainConfig &train,
                            int64_t totalSteps) {
  const int64_t perStep = train.num_micro_batches() * train.micro_batch_size();
  if (totalSteps <= 0 ||
      totalSteps > std::numeric_limits<int64_t>::max() / perStep)
    return absl::InvalidArgumentError(
        absl::StrCat("the run length is ", totalSteps,
                     " steps: it must be positive and steps * ", perStep,
                     " samples per step must fit in 64 bits"));
  return absl::OkStatus();
}

} // namespace

Trainer::Trainer(LoadedPlan plan, DataLoader data,
                 const TrainerOptions &options, int64_t totalSteps)
    : plan_(std::move(plan)), data_(std::move(data)),
      pool_(options.numThreads > 0 ? options.numThreads
                                   : ThreadPool::defaultThreadCount()),
      explicitTotal_(options.totalSteps > 0), shuffle_(options.shuffle),
      totalSteps_(totalSteps), schedule_(plan_.proto.train(), totalSteps) {}

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::create(LoadedPlan plan, TokenData data,
                const TrainerOptions &options) {
  const plan::TrainConfig &train = plan.proto.train();
  const int64_t total =
      options.totalSteps > 0 ? options.totalSteps : train.steps();
  if (absl::Status s = checkRunLength(train, total); !s.ok())
    return s;
  absl::StatusOr<DataLoader> loader = DataLoader::create(
      std::move(data), train.seq_len(), train.seed(), options.shuffle);
  if (!loader.ok())
    return loader.status();
  absl::StatusOr<CpuArena> arena =
      CpuArena::create(plan.proto.memory().arena_bytes());
  if (!arena.ok())
    return arena.status();
  std::unique_ptr<Trainer> trainer(
      new Trainer(std::move(plan), std::move(*loader), options, total));
  trainer->arena_ = std::move(*arena);
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(
      trainer->plan_, trainer->arena_.data(), trainer->arena_.size());
  if (!executor.ok())
    return executor.status();
  trainer->executor_ = std::move(*executor);
  initParameters(trainer->plan_, trainer->arena_.data(), &trainer->pool_);
  return trainer;
}

int64_t Trainer::tokensPerStep() const {
  const plan::TrainConfig &t = plan_.proto.train();
  return t.micro_batch_size() * t.num_micro_batches() * t.seq_len();
}

KernelContext Trainer::context(int64_t step, int64_t microBatch) {
  KernelContext ctx;
  ctx.step = step;
  ctx.microBatch = microBatch;
  ctx.lr = schedule_.at(step);
  ctx.seed = plan_.proto.train().seed();
  ctx.pool = &pool_;
  return ctx;
}

void Trainer::fillInputs(int64_t firstSample) {
  const plan::TrainConfig &t = plan_.proto.train();
  auto at = [&](uint32_t id) {
    return reinterpret_cast<int32_t *>(arena_.data() +
                                       plan_.proto.tensors(id).offset());
  };
  data_.fill(firstSample, t.micro_batch_size(), at(plan_.tokens),
             at(plan_.labels));
  if (plan_.positions) {
    int32_t *pos = at(*plan_.positions);
    for (int64_t b = 0; b < t.micro_batch_size(); ++b)
      for (int64_t s = 0; s < t.seq_len(); ++s)
        pos[b * t.seq_len() + s] = static_cast<int32_t>(s);
  }
}

float Trainer::readScalar(uint32_t id) const {
  float v;
  std::memcpy(&v, arena_.data() + plan_.proto.tensors(id).offset(), sizeof v);
  return v;
}

absl::StatusOr<double> Trainer::runMicroBatches() {
  if (gradientsPending_)
    return absl::FailedPreconditionError(absl::StrCat(
        "the micro-batches of step ", stepsDone_ + 1,
        " already ran: call optimizerStep() before running them again"));
  if (stepsDone_ >= totalSteps_)
    return absl::FailedPreconditionError(
        absl::StrCat("training is complete: ", stepsDone_, " of ", totalSteps_,
                     " steps are done"));
  const plan::TrainConfig &t = plan_.proto.train();
  const int64_t step = stepsDone_ + 1;
  double sum = 0;
  for (int64_t m = 0; m < t.num_micro_batches(); ++m) {
    fillInputs(cursor_ + m * t.micro_batch_size());
    KernelContext ctx = context(step, m);
    if (absl::Status s = executor_->run("micro_batch", ctx); !s.ok())
      return s;
    sum += readScalar(plan_.proto.loss_tensor());
  }
  gradientsPending_ = true;
  return sum / static_cast<double>(t.num_micro_batches());
}

absl::StatusOr<float> Trainer::optimizerStep() {
  if (!gradientsPending_)
    return absl::FailedPreconditionError(
        absl::StrCat("there are no gradients for step ", stepsDone_ + 1,
                     ": call runMicroBatches() first"));
  const plan::TrainConfig &t = plan_.proto.train();
  KernelContext ctx = context(stepsDone_ + 1, 0);
  if (absl::Status s = executor_->run("optimizer", ctx); !s.ok())
    return s;
  gradientsPending_ = false;
  ++stepsDone_;
  cursor_ += t.num_micro_batches() * t.micro_batch_size();
  return readScalar(plan_.proto.grad_norm_tensor());
}

absl::StatusOr<StepResult> Trainer::trainStep() {
  StepResult result;
  result.step = stepsDone_ + 1;
  result.lr = schedule_.at(result.step);
  absl::StatusOr<double> loss = runMicroBatches();
  if (!loss.ok())
    return loss.status();
  absl::StatusOr<float> norm = optimizerStep();
  if (!norm.ok())
    return norm.status();
  result.loss = *loss;
  result.gradNorm = *norm;
  return result;
}

absl::StatusOr<absl::Span<uint8_t>>
Trainer::tensorBytes(std::string_view name) {
  std::optional<uint32_t> id = plan_.findTensor(name);
  if (!id)
    return absl::NotFoundError(
        absl::StrCat("the plan has no tensor named \"",
                     absl::string_view(name.data(), name.size()), "\""));
  const plan::Tensor &t = plan_.proto.tensors(*id);
  return absl::Span<uint8_t>(arena_.data() + t.offset(), t.size_bytes());
}

absl::StatusOr<absl::Span<float>> Trainer::f32Tensor(std::string_view name) {
  absl::StatusOr<absl::Span<uint8_t>> bytes = tensorBytes(name);
  if (!bytes.ok())
    return bytes.status();
  const plan::Tensor &t = plan_.proto.tensors(*plan_.findTensor(name));
  if (t.dtype() != plan::F32)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", absl::string_view(name.data(), name.size()),
                     "\" is ", planDTypeName(t.dtype()), ", not f32"));
  return absl::Span<float>(reinterpret_cast<float *>(bytes->data()),
                           bytes->size() / sizeof(float));
}

absl::StatusOr<std::string>
Trainer::saveCheckpoint(const std::string &rootDir) const {
  if (gradientsPending_)
    return absl::FailedPreconditionError(
        "cannot save in the middle of a step: call optimizerStep() first");
  CheckpointState state;
  state.step = stepsDone_;
  state.dataCursor = cursor_;
  state.seed = plan_.proto.train().seed();
  state.totalSteps = totalSteps_;
  state.shuffle = shuffle_;
  state.planName = plan_.proto.name();
  return braid::saveCheckpoint(rootDir, plan_, arena_.data(), state);
}

absl::StatusOr<std::string> Trainer::resume(const std::string &dir) {
  absl::StatusOr<std::string> found = findCheckpointDir(dir);
  if (!found.ok())
    return found.status();
  absl::StatusOr<LoadedCheckpoint> ckpt = readCheckpoint(*found, plan_);
  if (!ckpt.ok())
    return ckpt.status();
  const CheckpointState &state = ckpt->state();
  if (state.shuffle != shuffle_)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", *found, "' was saved by a run ",
        state.shuffle ? "with" : "without",
        " --shuffle: resume it the same way, or the data order changes"));
  const int64_t total = explicitTotal_ ? totalSteps_ : state.totalSteps;
  if (absl::Status s = checkRunLength(plan_.proto.train(), total); !s.ok())
    return s;
  ckpt->copyInto(plan_, arena_.data());
  // Gradients are zero between steps; a step interrupted before its
  // optimizer update leaves them partly accumulated.
  for (uint32_t id : plan_.parameters) {
    const plan::Tensor &g =
        plan_.proto.tensors(plan_.proto.tensors(id).param().grad());
    std::memset(arena_.data() + g.offset(), 0, g.size_bytes());
  }
  gradientsPending_ = false;
  stepsDone_ = state.step;
  cursor_ = state.dataCursor;
  totalSteps_ = total;
  schedule_ = LrSchedule(plan_.proto.train(), total);
  return *found;
}

} // namespace braid
