#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include <sys/mman.h>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/RunIdentity.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/comm/Ranks.h"
#include "runtime/comm/SelfCommunicator.h"
#include "runtime/train/ParameterInit.h"

namespace braid {
namespace {

// Sample indices of the whole run must fit in 64 bits.
absl::Status checkRunLength(const plan::TrainConfig &train,
                            int64_t dataParallel, int64_t totalSteps) {
  const int64_t perStep = train.num_micro_batches() *
                          train.micro_batch_size() * dataParallel;
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
      explicitTotal_(options.totalSteps > 0), shuffle_(options.shuffle),
      totalSteps_(totalSteps), schedule_(plan_.proto.train(), totalSteps) {}

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::create(LoadedPlan plan, TokenData data,
                const TrainerOptions &options) {
  const plan::TrainConfig &train = plan.proto.train();
  const int64_t total =
      options.totalSteps > 0 ? options.totalSteps : train.steps();
  if (absl::Status s = checkRunLength(train, plan.proto.mesh().dp(), total);
      !s.ok())
    return s;
  absl::StatusOr<DataLoader> loader = DataLoader::create(
      std::move(data), train.seq_len(), train.seed(), options.shuffle);
  if (!loader.ok())
    return loader.status();
  const int64_t planRanks = planMesh(plan.proto.mesh()).worldSize();
  const int64_t runRanks = options.ranks ? options.ranks->worldSize() : 1;
  if (planRanks != runRanks)
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan is compiled for ", planRanks, " ranks but the run has ",
        runRanks));
  // A pipeline rank trains the plan of its PP coordinate; the others'
  // stay known only as far as checkpoints need them (WholeTensors).
  std::vector<LoadedPlan> stages;
  int64_t stage = 0, lossStage = 0;
  if (plan.pipeline()) {
    stage = options.ranks->coords()[static_cast<int>(MeshAxis::kPP)];
    lossStage = plan.lossStage;
    stages = std::move(plan.stages);
    plan = std::move(stages[stage]);
  }
  std::unique_ptr<Trainer> trainer(
      new Trainer(std::move(plan), std::move(*loader), options, total));
  trainer->ranks_ = options.ranks;
  trainer->ppSize_ = std::max<int64_t>(1, static_cast<int64_t>(stages.size()));
  trainer->ppRank_ = stage;
  trainer->lossStage_ = lossStage;
  if (!stages.empty() || WholeTensors::needed(trainer->plan_))
    trainer->whole_ =
        std::make_unique<WholeTensors>(trainer->plan_, stages, stage);
  stages.clear();
  if (options.ranks) {
    trainer->dpSize_ = options.ranks->dpSize();
    trainer->dpRank_ = options.ranks->dpRank();
  }
  DeviceOptions deviceOptions;
  deviceOptions.cudaGraphs = options.cudaGraphs;
  deviceOptions.numThreads = options.numThreads;
  deviceOptions.ranks = options.ranks;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      createDevice(trainer->plan_, deviceOptions);
  if (!device.ok())
    return device.status();
  trainer->device_ = std::move(*device);
  trainer->numThreads_ = trainer->device_->hostPool().size();
  if (absl::Status s = trainer->initialise(); !s.ok())
    return s;
  return trainer;
}

absl::Status Trainer::initialise() {
  // In place when every parameter is in an arena of host memory; a host
  // parameter (optimizer offload) is in the host arena, at offsets of its
  // own, so such plans write each parameter where it lives.
  if (uint8_t *arena = device_->hostArena();
      arena != nullptr && !plan_.hostPersistent) {
    initParameters(plan_, arena, &device_->hostPool(), coords());
  } else {
    std::vector<float> host;
    for (uint32_t id : plan_.parameters) {
      const plan::Tensor &t = plan_.proto.tensors(id);
      host.resize(static_cast<size_t>(plan_.descs[id].numel()));
      initParameter(plan_, id, host.data(), &device_->hostPool(), coords());
      if (absl::Status s = device_->writeTensor(t, host.data()); !s.ok())
        return s;
    }
  }
  // Buffers (an MoE layer's expert bias) start at zero.
  for (uint32_t id : plan_.buffers)
    if (absl::Status s = device_->zeroTensor(plan_.proto.tensors(id)); !s.ok())
      return s;
  return runInit();
}

absl::Status Trainer::runInit() {
  if (plan_.program(plan::INIT) == nullptr)
    return absl::OkStatus();
  return device_->run(plan::INIT, values(stepsDone_ + 1));
}

int64_t Trainer::tokensPerStep() const {
  const plan::TrainConfig &t = plan_.proto.train();
  return t.micro_batch_size() * t.num_micro_batches() * dpSize_ *
         t.seq_len();
}

StepValues Trainer::values(int64_t step) const {
  StepValues v;
  v.step = step;
  v.update = step - skippedSteps_;
  v.lr = schedule_.at(step);
  v.seed = plan_.proto.train().seed();
  if (ranks_) {
    v.tpRank = ranks_->coords()[static_cast<int>(MeshAxis::kTP)];
    v.tpSize = ranks_->mesh().size(MeshAxis::kTP);
    v.cpRank = ranks_->coords()[static_cast<int>(MeshAxis::kCP)];
    v.cpSize = ranks_->mesh().size(MeshAxis::kCP);
    v.epRank = ranks_->expertRank();
  }
  return v;
}

absl::Status Trainer::fillInputs(int64_t microBatch, int64_t firstSample) {
  const plan::TrainConfig &t = plan_.proto.train();
  // A pipeline rank stages the inputs its plan has: the first stage's the
  // tokens, the loss stage's the labels. The other of the pair, when one
  // is missing, is read into scratch memory.
  auto staged = [&](const std::optional<uint32_t> &id)
      -> absl::StatusOr<int32_t *> {
    if (!id) {
      unstaged_.resize(static_cast<size_t>(t.micro_batch_size() * t.seq_len()));
      return unstaged_.data();
    }
    absl::StatusOr<absl::Span<uint8_t>> span =
        device_->stageInput(*id, microBatch);
    if (!span.ok())
      return span.status();
    return reinterpret_cast<int32_t *>(span->data());
  };
  if (plan_.tokens || plan_.labels) {
    absl::StatusOr<int32_t *> tokens = staged(plan_.tokens);
    if (!tokens.ok())
      return tokens.status();
    absl::StatusOr<int32_t *> labels = staged(plan_.labels);
    if (!labels.ok())
      return labels.status();
    if (absl::Status s =
            data_.fill(firstSample, t.micro_batch_size(), *tokens, *labels);
        !s.ok())
      return s;
  }
  if (plan_.positions) {
    absl::StatusOr<absl::Span<uint8_t>> staged =
        device_->stageInput(*plan_.positions, microBatch);
    if (!staged.ok())
      return staged.status();
    int32_t *pos = reinterpret_cast<int32_t *>(staged->data());
    for (int64_t b = 0; b < t.micro_batch_size(); ++b)
      for (int64_t s = 0; s < t.seq_len(); ++s)
        pos[b * t.seq_len() + s] = static_cast<int32_t>(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Trainer::trainStep() {
  if (stepsDone_ >= totalSteps_)
    return absl::FailedPreconditionError(
        absl::StrCat("training is complete: ", stepsDone_, " of ", totalSteps_,
                     " steps are done"));
  const plan::TrainConfig &t = plan_.proto.train();
  StepResult result;
  result.step = stepsDone_ + 1;
  result.lr = schedule_.at(result.step);
  const int64_t M = t.num_micro_batches();
  for (int64_t m = 0; m < M; ++m)
    if (absl::Status s = fillInputs(
            m, cursor_ + (m * dpSize_ + dpRank_) * t.micro_batch_size());
        !s.ok())
      return s;
  if (absl::Status s = device_->run(plan::STEP, values(result.step)); !s.ok())
    return absl::Status(s.code(),
                        absl::StrCat("step ", result.step, ": ", s.message()));
  absl::StatusOr<std::vector<float>> slots = device_->readbacks();
  if (!slots.ok())
    return slots.status();
  const plan::Plan &p = plan_.proto;
  // Every rank's losses, in global micro-batch order, summed as one rank
  // would sum them. In a pipeline only the rank of the loss stage has
  // them; it gives them to the others of its PP group first.
  std::vector<float> local;
  for (uint32_t slot : p.loss_readbacks())
    local.push_back((*slots)[slot]);
  if (ppSize_ > 1) {
    local.resize(static_cast<size_t>(M));
    if (absl::Status s = ranks_->axis(MeshAxis::kPP).broadcast(
            local.data(), local.size() * sizeof(float),
            static_cast<int>(lossStage_));
        !s.ok())
      return absl::Status(s.code(),
                          absl::StrCat("step ", result.step,
                                       ", passing the losses on from pipeline "
                                       "rank ",
                                       lossStage_, ": ", s.message()));
  }
  // Context parallel: each rank's loss is the mean over its part of the
  // sequences, and the parts are equal, so the micro-batch's loss is the
  // mean of its CP group's.
  const int64_t cpSize = ranks_ ? ranks_->mesh().size(MeshAxis::kCP) : 1;
  if (cpSize > 1) {
    if (absl::Status s = ranks_->axis(MeshAxis::kCP).allReduceSum(
            local.data(), local.size(), DType::kF32);
        !s.ok())
      return absl::Status(s.code(), absl::StrCat("step ", result.step,
                                                 ", summing the losses over "
                                                 "the context-parallel "
                                                 "ranks: ",
                                                 s.message()));
    for (float &loss : local)
      loss /= static_cast<float>(cpSize);
  }
  std::vector<float> losses(local.size() * dpSize_);
  if (dpSize_ == 1) {
    losses = local;
  } else {
    std::vector<float> byRank(losses.size());
    if (absl::Status s = ranks_->axis(MeshAxis::kDP).allGather(
            local.data(), byRank.data(), local.size(), DType::kF32);
        !s.ok())
      return absl::Status(s.code(), absl::StrCat("step ", result.step,
                                                 ", gathering the losses: ",
                                                 s.message()));
    for (int64_t r = 0; r < dpSize_; ++r)
      for (int64_t m = 0; m < M; ++m)
        losses[m * dpSize_ + r] = byRank[r * M + m];
  }
  double sum = 0;
  for (float loss : losses)
    sum += loss;
  result.loss = sum / static_cast<double>(losses.size());
  result.gradNorm = (*slots)[p.grad_norm_readback()];
  result.skipped = (*slots)[p.step_skipped_readback()] != 0;
  if (absl::Status s = gatherMoeChoices(result); !s.ok())
    return s;
  ++stepsDone_;
  skippedSteps_ += result.skipped ? 1 : 0;
  cursor_ += M * dpSize_ * t.micro_batch_size();
  return result;
}

absl::Status Trainer::sumOverRanks(int32_t *values, size_t n) {
  // Summed along each axis in turn, which sums over the whole mesh.
  for (MeshAxis axis : kMeshAxes) {
    if (!ranks_ || ranks_->mesh().size(axis) == 1)
      continue;
    if (absl::Status s = ranks_->axis(axis).allReduceSum(values, n, DType::kI32);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

absl::Status Trainer::gatherMoeChoices(StepResult &result) {
  const plan::MoeInfo &moe = plan_.proto.model().moe();
  const bool adaptive = moe.adaptive_recompute_rows() > 0;
  const bool replication = moe.hot_experts() > 0;
  const KernelCounters *counters = device_->kernelCounters();
  if ((!adaptive && !replication) || counters == nullptr)
    return absl::OkStatus();
  // Each rank's {kept, recomputed, replicated, not replicated} in its own
  // place, zeros elsewhere.
  constexpr int64_t kPerRank = 4;
  const int64_t n = worldSize(), me = worldRank();
  std::vector<int32_t> counts(static_cast<size_t>(kPerRank * n), 0);
  int32_t *mine = counts.data() + kPerRank * me;
  mine[0] = static_cast<int32_t>(counters->activationsKept.load());
  mine[1] = static_cast<int32_t>(counters->activationsRecomputed.load());
  mine[2] = static_cast<int32_t>(counters->replicationOn.load());
  mine[3] = static_cast<int32_t>(counters->replicationOff.load());
  if (absl::Status s = sumOverRanks(counts.data(), counts.size()); !s.ok())
    return absl::Status(s.code(),
                        absl::StrCat("step ", result.step,
                                     ", gathering the experts' adaptive "
                                     "recompute and replication: ",
                                     s.message()));
  for (int64_t r = 0; r < n; ++r) {
    const int32_t *theirs = counts.data() + kPerRank * r;
    if (adaptive) {
      result.activationsKept.push_back(theirs[0]);
      result.activationsRecomputed.push_back(theirs[1]);
    }
    if (replication) {
      result.passesReplicated.push_back(theirs[2]);
      result.moePasses.push_back(theirs[2] + theirs[3]);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Trainer::agreeOnStop(int localSignal) {
  if (worldSize() == 1)
    return localSignal;
  // {ranks stopping, sum of their signals}, over every rank.
  int32_t votes[2] = {localSignal != 0 ? 1 : 0, localSignal};
  if (absl::Status s = sumOverRanks(votes, 2); !s.ok())
    return absl::Status(s.code(),
                        absl::StrCat("agreeing on a stop after step ",
                                     stepsDone_, ": ", s.message()));
  if (votes[0] == 0)
    return 0;
  return localSignal != 0 ? localSignal : votes[1] / votes[0];
}

absl::StatusOr<absl::Span<uint8_t>>
Trainer::tensorBytes(std::string_view name) {
  std::optional<uint32_t> id = plan_.findTensor(name);
  if (!id)
    return absl::NotFoundError(
        absl::StrCat("the plan has no tensor named \"",
                     absl::string_view(name.data(), name.size()), "\""));
  const plan::Tensor &t = plan_.proto.tensors(*id);
  // A host tensor is in the host arena, at an offset of its own.
  uint8_t *arena =
      t.host() ? device_->hostTensorArena() : device_->hostArena();
  if (arena == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        t.host() ? "the host arena is pinned memory the " : "the arena is in ",
        device_->info().name,
        t.host() ? " uses asynchronously" : " memory, not host memory",
        ": read tensors with readTensor"));
  return absl::Span<uint8_t>(arena + t.offset(), t.size_bytes());
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

absl::StatusOr<std::vector<uint8_t>>
Trainer::readTensor(std::string_view name) {
  std::optional<uint32_t> id = plan_.findTensor(name);
  if (!id)
    return absl::NotFoundError(
        absl::StrCat("the plan has no tensor named \"",
                     absl::string_view(name.data(), name.size()), "\""));
  const plan::Tensor &t = plan_.proto.tensors(*id);
  std::vector<uint8_t> out(t.size_bytes());
  if (absl::Status s = device_->readTensor(t, out.data()); !s.ok())
    return s;
  return out;
}

absl::Status Trainer::copyCheckpointTensors(uint8_t *image, bool toDevice) {
  auto copy = [&](uint32_t id) {
    // The image holds the host arena's tensors after the arena's
    // (LoadedPlan::imageOffset).
    const plan::Tensor &t = plan_.proto.tensors(id);
    return toDevice ? device_->writeTensor(t, image + plan_.imageOffset(id))
                    : device_->readTensor(t, image + plan_.imageOffset(id));
  };
  for (uint32_t id : plan_.parameters) {
    const plan::ParameterInfo &info = plan_.proto.tensors(id).param();
    for (uint32_t t : {id, info.exp_avg(), info.exp_avg_sq()})
      if (absl::Status s = copy(t); !s.ok())
        return s;
  }
  for (uint32_t id : plan_.buffers)
    if (absl::Status s = copy(id); !s.ok())
      return s;
  return absl::OkStatus();
}

namespace {

// A host image of the arena (and after it the host arena:
// LoadedPlan::imageOffset) for a device whose arena is elsewhere, or a plan
// with host parameters. Mapped
// without reserving swap, so only the pages of the checkpointed tensors are
// ever backed by memory, however large the arena.
class ArenaImage {
public:
  static absl::StatusOr<ArenaImage> create(uint64_t bytes) {
    ArenaImage image;
    image.size_ = bytes > 0 ? bytes : 1;
    void *p = mmap(nullptr, image.size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", bytes,
                       " bytes of host memory for the checkpoint image: ",
                       std::strerror(errno)));
    image.data_ = static_cast<uint8_t *>(p);
    return image;
  }
  ArenaImage(ArenaImage &&other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  ArenaImage(const ArenaImage &) = delete;
  ArenaImage &operator=(const ArenaImage &) = delete;
  ArenaImage &operator=(ArenaImage &&) = delete;
  ~ArenaImage() {
    if (data_ != nullptr)
      munmap(data_, size_);
  }
  uint8_t *data() const { return data_; }

private:
  ArenaImage() = default;
  uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace

absl::StatusOr<std::string>
Trainer::saveCheckpoint(const std::string &rootDir,
                        const CheckpointLayout &layout) {
  CheckpointState state;
  state.step = stepsDone_;
  state.dataCursor = cursor_;
  state.totalSteps = totalSteps_;
  state.shuffle = shuffle_;
  state.skippedSteps = skippedSteps_;
  state.identity = planIdentity(plan_.proto);
  state.fingerprint = identityFingerprint(state.identity);
  // Only the fp32 masters and moments are saved: weight copies are cast
  // from the masters again by "init" on resume.
  absl::StatusOr<std::string> dir;
  if (whole_) {
    absl::StatusOr<ArenaImage> image = ArenaImage::create(whole_->imageBytes());
    if (!image.ok())
      return image.status();
    SelfCommunicator self("group 0 (rank 0)");
    auto groups = [&](plan::MeshAxis axis) -> Communicator & {
      return ranks_ ? ranks_->group(axis) : self;
    };
    // The writer is world rank 0: the other stages' tensors go to PP rank 0
    // of its DP replica and TP and CP coordinate 0 only (each TP rank holds
    // the whole tensors after the gather; CP ranks hold the same ones).
    const int64_t tpRank = coords()[static_cast<int>(MeshAxis::kTP)];
    const int64_t cpRank = coords()[static_cast<int>(MeshAxis::kCP)];
    Communicator *pp = ppSize_ > 1 && dpRank_ == 0 && tpRank == 0 &&
                               cpRank == 0
                           ? &ranks_->axis(MeshAxis::kPP)
                           : nullptr;
    if (absl::Status s = whole_->gather(*device_, groups, pp, image->data());
        !s.ok())
      return s;
    if (rootDir.empty())
      return std::string();
    dir = braid::saveCheckpoint(rootDir, whole_->plan(), image->data(), state,
                                layout);
  } else if (rootDir.empty()) {
    return std::string();
  } else if (const uint8_t *arena = device_->hostArena();
             arena != nullptr && !plan_.hostPersistent) {
    dir = braid::saveCheckpoint(rootDir, plan_, arena, state, layout);
  } else {
    absl::StatusOr<ArenaImage> image = ArenaImage::create(plan_.imageBytes());
    if (!image.ok())
      return image.status();
    if (absl::Status s = copyCheckpointTensors(image->data(), false); !s.ok())
      return s;
    dir = braid::saveCheckpoint(rootDir, plan_, image->data(), state, layout);
  }
  if (dir.ok())
    lastCheckpoint_ = *dir;
  return dir;
}

absl::StatusOr<ResumeReport>
Trainer::resume(const std::string &dir,
                const std::set<std::string> &allowedChanges) {
  absl::StatusOr<std::string> found = findCheckpointDir(dir);
  if (!found.ok())
    return found.status();
  std::set<std::string> allowed = allowedChanges;
  if (explicitTotal_)
    allowed.insert("train.steps");
  // A sharded run reads the whole tensors and keeps its rows.
  const LoadedPlan &stored = whole_ ? whole_->plan() : plan_;
  absl::StatusOr<LoadedCheckpoint> ckpt =
      readCheckpoint(*found, stored, allowed);
  if (!ckpt.ok())
    return ckpt.status();
  const CheckpointState &state = ckpt->state();
  const std::vector<IdentityChange> &changes = ckpt->changes();
  if (state.shuffle != shuffle_)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", *found, "' was saved by a run ",
        state.shuffle ? "with" : "without",
        " --shuffle: resume it the same way, or the data order changes"));
  // The run length: an explicit --steps wins; otherwise a plan whose steps
  // were allowed to change sets it; otherwise the checkpoint's.
  const bool newPlanSteps =
      std::any_of(changes.begin(), changes.end(), [](const IdentityChange &c) {
        return c.name == "train.steps";
      });
  const int64_t total = explicitTotal_  ? totalSteps_
                        : newPlanSteps ? plan_.proto.train().steps()
                                        : state.totalSteps;
  if (absl::Status s = checkRunLength(plan_.proto.train(), dpSize_, total);
      !s.ok())
    return s;
  if (total < state.step)
    return absl::InvalidArgumentError(absl::StrCat(
        "the run is to end at step ", total, " but the checkpoint '", *found,
        "' is already at step ", state.step));
  if (whole_) {
    absl::StatusOr<ArenaImage> image = ArenaImage::create(whole_->imageBytes());
    if (!image.ok())
      return image.status();
    // Only this rank's tensors: a pipeline rank's image has room for the
    // whole model, but touches only the pages of its own stage.
    if (absl::Status s =
            ckpt->copyInto(stored, image->data(), &whole_->mine());
        !s.ok())
      return s;
    if (absl::Status s = whole_->scatter(image->data(), coords(), *device_);
        !s.ok())
      return s;
  } else if (uint8_t *arena = device_->hostArena();
             arena != nullptr && !plan_.hostPersistent) {
    if (absl::Status s = ckpt->copyInto(plan_, arena); !s.ok())
      return s;
  } else {
    absl::StatusOr<ArenaImage> image = ArenaImage::create(plan_.imageBytes());
    if (!image.ok())
      return image.status();
    if (absl::Status s = ckpt->copyInto(plan_, image->data()); !s.ok())
      return s;
    if (absl::Status s = copyCheckpointTensors(image->data(), true); !s.ok())
      return s;
  }
  // Gradients and the loss sum are zero between steps; a step interrupted
  // before its optimizer update leaves them partly accumulated.
  for (uint32_t id : plan_.parameters) {
    const plan::Tensor &g =
        plan_.proto.tensors(plan_.proto.tensors(id).param().grad());
    if (absl::Status s = device_->zeroTensor(g); !s.ok())
      return s;
  }
  const plan::Tensor &lossSum =
      plan_.proto.tensors(plan_.proto.loss_sum_tensor());
  if (absl::Status s = device_->zeroTensor(lossSum); !s.ok())
    return s;
  stepsDone_ = state.step;
  cursor_ = state.dataCursor;
  skippedSteps_ = state.skippedSteps;
  totalSteps_ = total;
  schedule_ = LrSchedule(plan_.proto.train(), total);
  lastCheckpoint_ = *found;
  // The weight copies follow the restored masters.
  if (absl::Status s = runInit(); !s.ok())
    return s;

  ResumeReport report;
  report.dir = *found;
  for (const IdentityChange &c : changes)
    if (c.name != "train.steps")
      report.changes.push_back(
          absl::StrCat(c.name, ": ", c.saved, " -> ", c.current));
  if (total != state.totalSteps)
    report.changes.push_back(absl::StrCat("run length: ", state.totalSteps,
                                          " -> ", total, " steps"));
  return report;
}

} // namespace braid
