#include "runtime/device/cuda/CudaDevice.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/CublasLtApi.h"
#include "runtime/device/GpuPeaks.h"
#include "runtime/device/cuda/CudaHandles.h"
#include "runtime/device/cuda/CudaProbe.h"
#include "runtime/device/cuda/CudaStatus.h"
#include "runtime/device/cuda/GraphPolicy.h"
#include "runtime/device/cuda/StreamSchedule.h"
#include "runtime/executor/StagingLayout.h"

namespace braid {
namespace {

// Alignment of the regions after the arena in the single allocation.
constexpr uint64_t kRegionAlignment = 256;
// cuBLASLt scratch per stream: what NVIDIA recommends for Hopper.
constexpr uint64_t kWorkspaceBytes = 32ull << 20;
// Pinned step-value slots: a slot is reused only after the copy out of it
// has run, which the ring makes rare (one wait per kStepSlots runs at most).
constexpr int kStepSlots = 64;

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct BlasLtRelease {
  const cuda::CublasLtApi *api = nullptr;
  cublasLtHandle_t handle = nullptr;
  ~BlasLtRelease() {
    if (api && handle)
      cuda::destroyHandle(*api, handle);
  }
};

class CudaDevice final : public DeviceBackend {
public:
  CudaDevice(const LoadedPlan &plan, bool cudaGraphs)
      : plan_(plan), cudaGraphs_(cudaGraphs), layout_(plan) {}
  ~CudaDevice() override;

  absl::Status init(const CudaGpu &gpu);

  const DeviceInfo &info() const override { return info_; }
  uint8_t *hostArena() override { return nullptr; }
  absl::Status read(uint64_t offset, void *out, uint64_t bytes) override;
  absl::Status write(uint64_t offset, const void *in, uint64_t bytes) override;
  absl::Status zero(uint64_t offset, uint64_t bytes) override;
  absl::StatusOr<absl::Span<uint8_t>> stageInput(uint32_t tensor,
                                                 int64_t microBatch) override;
  absl::Status run(plan::ProgramKind kind, const StepValues &values) override;
  absl::StatusOr<std::vector<float>> readbacks() override;
  void setProfile(KernelProfile *profile) override { profile_ = profile; }
  DeviceStats stats() const override { return stats_; }

private:
  // One instruction of a program, bound to device memory.
  struct Op {
    LoadedInstruction::Kind kind = LoadedInstruction::Kind::kLaunch;
    uint32_t stream = 0;
    const KernelDef *kernel = nullptr;
    std::vector<TensorView> ins;
    std::vector<TensorView> outs;
    const KernelParams *params = nullptr;
    int64_t microBatch = 0;
    // kStage / kReadback: a copy of `bytes` bytes between host and device
    // (in iteration i of a Repeat body, from + i * fromStride to
    // to + i * toStride).
    uint8_t *to = nullptr;
    const uint8_t *from = nullptr;
    uint64_t bytes = 0;
    uint64_t fromStride = 0, toStride = 0;
    // kRepeat: the next `length` ops run `count` times.
    uint32_t count = 0, length = 0;
    // kRecord: the slot to record (or none); kWait: the slots to wait for.
    std::optional<uint32_t> recordSlot;
    std::vector<uint32_t> waitSlots;
  };
  struct Program {
    std::string name;
    plan::ProgramKind kind = plan::PROGRAM_UNSPECIFIED;
    std::vector<Op> ops;
    std::vector<uint32_t> streams; // ascending, 0 first
    std::vector<CudaEvent> slots;
    GraphPolicy policy{false, std::nullopt};
    CudaGraphExec graph;
  };

  uint8_t *at(uint64_t offset) const {
    return static_cast<uint8_t *>(memory_.get()) + offset;
  }
  cudaStream_t stream(uint32_t s) const { return streams_[s].get(); }
  absl::Status bindPrograms();
  absl::Status enqueue(Program &program, const KernelContext *contexts,
                       bool profiling);
  // Captures the program into a graph and launches it. On failure nothing
  // of the program has run and no stream is left capturing, unless the
  // returned status says otherwise (`recoverable` false).
  absl::Status capture(Program &program, const KernelContext *contexts,
                       bool *recoverable);
  absl::Status copyIn(const StepValues &values);
  // The error of a kernel launch of `program`, as a sentence.
  absl::Status launchError(const Program &program, cudaError_t err) const;
  // `what` failed while waiting for work started earlier.
  absl::Status waitError(std::string_view what, cudaError_t err) const;

  const LoadedPlan &plan_;
  const bool cudaGraphs_;
  DeviceInfo info_;
  int ccMajor_ = 0, ccMinor_ = 0; // compute capability
  const cuda::CublasLtApi *blasApi_ = nullptr;
  BlasLtRelease blasLt_;
  // arena | step values | workspace per stream
  DeviceMemory memory_;
  uint64_t stepValuesOffset_ = 0;
  uint64_t workspaceOffset_ = 0;
  std::vector<CudaStream> streams_;
  CudaEvent fork_;
  std::vector<CudaEvent> joins_;
  std::vector<GpuContext> gpuContexts_;
  std::vector<Program> programs_;
  // Pinned staging block (StagingLayout.h): the step's inputs and its
  // readback slots, and the event after the last run that copies from or
  // into it.
  StagingLayout layout_;
  PinnedMemory staging_;
  CudaEvent stagingDone_;
  bool stagingPending_ = false;
  // Pinned ring of step values and the event after each slot's copy.
  PinnedMemory stepHost_;
  std::vector<CudaEvent> stepCopied_;
  std::vector<bool> stepPending_;
  int nextStepSlot_ = 0;
  // Profiling: one start/stop pair per timed launch of a run.
  std::vector<std::pair<CudaEvent, CudaEvent>> timers_;
  KernelProfile *profile_ = nullptr;
  DeviceStats stats_;
};

CudaDevice::~CudaDevice() {
  // Nothing may still run over the memory released below.
  if (!streams_.empty())
    (void)cudaDeviceSynchronize();
}

absl::Status CudaDevice::init(const CudaGpu &gpu) {
  BRAID_CUDA_TRY(cudaSetDevice(gpu.ordinal));
  info_.kind = Device::kCUDA;
  info_.name = gpu.name;
  info_.memoryBytes = gpu.memoryBytes;
  if (std::optional<double> tflops = bf16DensePeakTflops(gpu.name))
    info_.peakGflops = *tflops * 1000.0;
  info_.cudaGraphs = cudaGraphs_;
  ccMajor_ = gpu.major;
  ccMinor_ = gpu.minor;

  absl::StatusOr<const cuda::CublasLtApi *> api = cuda::loadCublasLt();
  if (!api.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("cannot use a GPU: ", api.status().message()));
  blasApi_ = *api;
  absl::StatusOr<cublasLtHandle_t> handle = cuda::createHandle(*blasApi_);
  if (!handle.ok())
    return handle.status();
  blasLt_.api = blasApi_;
  blasLt_.handle = *handle;

  const uint32_t numStreams = plan_.proto.num_streams();
  const uint64_t arenaBytes = plan_.proto.memory().arena_bytes();
  stepValuesOffset_ = alignUp(arenaBytes, kRegionAlignment);
  workspaceOffset_ =
      alignUp(stepValuesOffset_ + sizeof(StepValues), kRegionAlignment);
  const uint64_t total = workspaceOffset_ + numStreams * kWorkspaceBytes;
  void *memory = nullptr;
  if (cudaError_t err = cudaMalloc(&memory, total); err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the arena on ", gpu.name, ": ", total,
        " bytes (arena ", arenaBytes, " + step values + cuBLASLt workspaces) "
        "asked for, ", cudaGetErrorString(err)));
  }
  memory_ = DeviceMemory(memory);
  // On the legacy default stream, which the non-blocking streams below do
  // not order against: finish it before anything else touches the arena.
  BRAID_CUDA_TRY(cudaMemset(memory, 0, total));
  BRAID_CUDA_TRY(cudaDeviceSynchronize());

  for (uint32_t s = 0; s < numStreams; ++s) {
    cudaStream_t st = nullptr;
    BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    streams_.emplace_back(st);
  }
  auto newEvent = [](CudaEvent &out) -> absl::Status {
    cudaEvent_t e = nullptr;
    BRAID_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    out = CudaEvent(e);
    return absl::OkStatus();
  };
  if (absl::Status s = newEvent(fork_); !s.ok())
    return s;
  joins_.resize(numStreams);
  for (CudaEvent &e : joins_)
    if (absl::Status s = newEvent(e); !s.ok())
      return s;

  const auto *stepValues =
      reinterpret_cast<const StepValues *>(at(stepValuesOffset_));
  gpuContexts_.resize(numStreams);
  for (uint32_t s = 0; s < numStreams; ++s) {
    GpuContext &g = gpuContexts_[s];
    g.stream = stream(s);
    g.blasLt = blasLt_.handle;
    g.workspace = at(workspaceOffset_ + s * kWorkspaceBytes);
    g.workspaceBytes = kWorkspaceBytes;
    g.api = blasApi_;
    g.stepValues = stepValues;
  }

  // Pinned staging: the step's inputs and readbacks, and the step-value
  // ring.
  void *staging = nullptr;
  BRAID_CUDA_TRY(cudaMallocHost(&staging, std::max<uint64_t>(1, layout_.bytes())));
  staging_ = PinnedMemory(staging);
  if (absl::Status s = newEvent(stagingDone_); !s.ok())
    return s;
  void *stepHost = nullptr;
  BRAID_CUDA_TRY(cudaMallocHost(&stepHost, kStepSlots * sizeof(StepValues)));
  stepHost_ = PinnedMemory(stepHost);
  stepCopied_.resize(kStepSlots);
  stepPending_.assign(kStepSlots, false);
  for (CudaEvent &e : stepCopied_)
    if (absl::Status s = newEvent(e); !s.ok())
      return s;
  return bindPrograms();
}

absl::Status CudaDevice::bindPrograms() {
  const uint32_t numStreams = plan_.proto.num_streams();
  auto view = [&](uint32_t id) {
    return TensorView{at(plan_.proto.tensors(id).offset()), &plan_.descs[id]};
  };
  programs_.reserve(plan_.programs.size());
  for (size_t p = 0; p < plan_.programs.size(); ++p) {
    const LoadedProgram &loaded = plan_.programs[p];
    StreamSchedule schedule =
        scheduleProgram(loaded, static_cast<int>(p), numStreams);
    Program &program = programs_.emplace_back();
    program.name = loaded.name;
    program.kind = loaded.kind;
    program.streams = schedule.streams;
    program.policy = GraphPolicy(cudaGraphs_, schedule.graphRefusal);
    if (cudaGraphs_ && schedule.graphRefusal)
      std::fprintf(stderr, "braid-run: note: %s\n",
                   schedule.graphRefusal->c_str());
    for (uint32_t i = 0; i < schedule.numSlots; ++i) {
      cudaEvent_t e = nullptr;
      BRAID_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      program.slots.emplace_back(e);
    }
    // Event work by instruction index; launches are bound directly.
    std::vector<const EventOp *> eventOf(loaded.instructions.size(), nullptr);
    for (const EventOp &e : schedule.eventOps)
      eventOf[e.instruction] = &e;
    for (size_t i = 0; i < loaded.instructions.size(); ++i) {
      const LoadedInstruction &inst = loaded.instructions[i];
      Op op;
      op.kind = inst.kind;
      op.stream = inst.stream;
      auto *host = static_cast<uint8_t *>(staging_.get());
      if (inst.kind == LoadedInstruction::Kind::kLaunch) {
        op.kernel = inst.kernel;
        op.params = &inst.params;
        op.microBatch = inst.microBatch;
        for (uint32_t id : inst.inputs)
          op.ins.push_back(view(id));
        for (uint32_t id : inst.outputs)
          op.outs.push_back(view(id));
      } else if (inst.kind == LoadedInstruction::Kind::kStage) {
        // The loader checked the tensor and the micro-batch.
        op.from = host + *layout_.inputOffset(inst.tensor, inst.microBatch);
        op.to = static_cast<uint8_t *>(view(inst.tensor).data);
        op.bytes = plan_.proto.tensors(inst.tensor).size_bytes();
        op.fromStride = layout_.inputStride(inst.tensor);
      } else if (inst.kind == LoadedInstruction::Kind::kReadback) {
        op.from = static_cast<const uint8_t *>(view(inst.tensor).data);
        op.to = host + layout_.readbackOffset(inst.slot);
        op.bytes = sizeof(float);
        op.toStride = sizeof(float);
      } else if (inst.kind == LoadedInstruction::Kind::kRepeat) {
        op.count = inst.count;
        op.length = inst.length;
      } else {
        const EventOp *e = eventOf[i];
        if (e == nullptr)
          continue; // a record no wait needs, or a wait with nothing to wait for
        if (e->kind == EventOp::Kind::kRecord)
          op.recordSlot = e->slot;
        else
          op.waitSlots = e->waitSlots;
      }
      program.ops.push_back(std::move(op));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::read(uint64_t offset, void *out, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemcpyAsync(out, at(offset), bytes, cudaMemcpyDeviceToHost,
                                 stream(0)));
  if (cudaError_t err = cudaStreamSynchronize(stream(0)); err != cudaSuccess)
    return waitError("cudaStreamSynchronize", err);
  return absl::OkStatus();
}

absl::Status CudaDevice::write(uint64_t offset, const void *in,
                               uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemcpyAsync(at(offset), in, bytes, cudaMemcpyHostToDevice,
                                 stream(0)));
  // `in` is the caller's memory, valid only until this call returns.
  if (cudaError_t err = cudaStreamSynchronize(stream(0)); err != cudaSuccess)
    return waitError("cudaStreamSynchronize", err);
  return absl::OkStatus();
}

absl::Status CudaDevice::zero(uint64_t offset, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemsetAsync(at(offset), 0, bytes, stream(0)));
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>>
CudaDevice::stageInput(uint32_t tensor, int64_t microBatch) {
  std::optional<uint64_t> offset = layout_.inputOffset(tensor, microBatch);
  if (!offset)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", tensor, " micro-batch ", microBatch,
                     " is not an INPUT of a step of the plan"));
  // The previous step's copies must have read the block before it is
  // refilled.
  if (stagingPending_) {
    if (cudaError_t err = cudaEventSynchronize(stagingDone_.get());
        err != cudaSuccess)
      return waitError("cudaEventSynchronize", err);
    stagingPending_ = false;
  }
  return absl::Span<uint8_t>(static_cast<uint8_t *>(staging_.get()) + *offset,
                             plan_.proto.tensors(tensor).size_bytes());
}

// Stream 0, before the program: this run's step values, from pinned memory.
absl::Status CudaDevice::copyIn(const StepValues &values) {
  const int slot = nextStepSlot_;
  nextStepSlot_ = (nextStepSlot_ + 1) % kStepSlots;
  if (stepPending_[slot]) {
    if (cudaError_t err = cudaEventSynchronize(stepCopied_[slot].get());
        err != cudaSuccess)
      return waitError("cudaEventSynchronize", err);
  }
  StepValues *host = static_cast<StepValues *>(stepHost_.get()) + slot;
  *host = values;
  BRAID_CUDA_TRY(cudaMemcpyAsync(at(stepValuesOffset_), host,
                                 sizeof(StepValues), cudaMemcpyHostToDevice,
                                 stream(0)));
  BRAID_CUDA_TRY(cudaEventRecord(stepCopied_[slot].get(), stream(0)));
  stepPending_[slot] = true;
  return absl::OkStatus();
}

// Fork from stream 0, the program's instructions, join back into stream 0.
// Eager or under capture alike: nothing here may synchronise with the host.
absl::Status CudaDevice::enqueue(Program &program,
                                 const KernelContext *contexts,
                                 bool profiling) {
  // Kernel launches report errors only through cudaGetLastError: start from
  // a clean slate, so that the check below sees this program's launches.
  (void)cudaGetLastError();
  BRAID_CUDA_TRY(cudaEventRecord(fork_.get(), stream(0)));
  for (uint32_t s : program.streams)
    if (s != 0)
      BRAID_CUDA_TRY(cudaStreamWaitEvent(stream(s), fork_.get(), 0));
  // The kernels timed, in launch order.
  std::vector<const KernelDef *> timed;
  auto issue = [&](const Op &op, int64_t iteration) -> absl::Status {
    switch (op.kind) {
    case LoadedInstruction::Kind::kLaunch: {
      const bool time = profiling && op.stream == 0;
      if (time) {
        if (timed.size() == timers_.size()) {
          cudaEvent_t a = nullptr, b = nullptr;
          BRAID_CUDA_TRY(cudaEventCreate(&a));
          BRAID_CUDA_TRY(cudaEventCreate(&b));
          timers_.emplace_back(CudaEvent(a), CudaEvent(b));
        }
        BRAID_CUDA_TRY(
            cudaEventRecord(timers_[timed.size()].first.get(), stream(0)));
      }
      op.kernel->run(KernelArgs{op.ins, op.outs, op.params,
                                &contexts[op.stream],
                                op.microBatch + iteration});
      if (time) {
        BRAID_CUDA_TRY(
            cudaEventRecord(timers_[timed.size()].second.get(), stream(0)));
        timed.push_back(op.kernel);
      }
      break;
    }
    case LoadedInstruction::Kind::kStage:
      BRAID_CUDA_TRY(cudaMemcpyAsync(op.to, op.from + iteration * op.fromStride,
                                     op.bytes, cudaMemcpyHostToDevice,
                                     stream(op.stream)));
      break;
    case LoadedInstruction::Kind::kReadback:
      BRAID_CUDA_TRY(cudaMemcpyAsync(op.to + iteration * op.toStride, op.from,
                                     op.bytes, cudaMemcpyDeviceToHost,
                                     stream(op.stream)));
      break;
    case LoadedInstruction::Kind::kRecord:
      BRAID_CUDA_TRY(cudaEventRecord(program.slots[*op.recordSlot].get(),
                                     stream(op.stream)));
      break;
    case LoadedInstruction::Kind::kWait:
      for (uint32_t slot : op.waitSlots)
        BRAID_CUDA_TRY(cudaStreamWaitEvent(stream(op.stream),
                                           program.slots[slot].get(), 0));
      break;
    case LoadedInstruction::Kind::kRepeat:
      break; // the loop below runs the body
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const Op &op = program.ops[i];
    if (op.kind != LoadedInstruction::Kind::kRepeat) {
      if (absl::Status s = issue(op, 0); !s.ok())
        return s;
      continue;
    }
    const size_t begin = i + 1, end = begin + op.length;
    for (int64_t it = 0; it < op.count; ++it)
      for (size_t k = begin; k < end; ++k)
        if (absl::Status s = issue(program.ops[k], it); !s.ok())
          return s;
    i = end - 1;
  }
  for (uint32_t s : program.streams) {
    if (s == 0)
      continue;
    BRAID_CUDA_TRY(cudaEventRecord(joins_[s].get(), stream(s)));
    BRAID_CUDA_TRY(cudaStreamWaitEvent(stream(0), joins_[s].get(), 0));
  }
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    return launchError(program, err);
  if (profiling && !timed.empty()) {
    if (cudaError_t err = cudaStreamSynchronize(stream(0)); err != cudaSuccess)
      return waitError("cudaStreamSynchronize", err);
    for (size_t k = 0; k < timed.size(); ++k) {
      float ms = 0;
      BRAID_CUDA_TRY(cudaEventElapsedTime(&ms, timers_[k].first.get(),
                                          timers_[k].second.get()));
      profile_->add(timed[k]->name, ms / 1000.0);
    }
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::run(plan::ProgramKind kind, const StepValues &values) {
  Program *program = nullptr;
  for (Program &p : programs_)
    if (p.kind == kind)
      program = &p;
  if (program == nullptr)
    return absl::NotFoundError(absl::StrCat(
        "the plan has no ", plan::ProgramKind_Name(kind), " program"));
  if (absl::Status s = copyIn(values); !s.ok())
    return s;

  // Kernels read the per-run values from gpu->stepValues; the host copies
  // below serve kernels that only size their launches from them.
  std::vector<KernelContext> contexts(gpuContexts_.size());
  for (size_t s = 0; s < contexts.size(); ++s) {
    contexts[s].step = values.step;
    contexts[s].update = values.update;
    contexts[s].lr = values.lr;
    contexts[s].seed = values.seed;
    contexts[s].gpu = &gpuContexts_[s];
  }

  // The arena is allocated once, so every graph stays valid: epoch 0.
  constexpr uint64_t kEpoch = 0;
  const bool profiling = profile_ != nullptr;
  GraphPolicy::Action action = program->policy.next(kEpoch, profiling);
  absl::Status status;
  switch (action) {
  case GraphPolicy::Action::kEager:
    status = enqueue(*program, contexts.data(), profiling);
    if (status.ok())
      ++stats_.eagerRuns;
    break;
  case GraphPolicy::Action::kCapture: {
    bool recoverable = true;
    status = capture(*program, contexts.data(), &recoverable);
    if (status.ok()) {
      ++stats_.graphCaptures;
      break;
    }
    const std::string why =
        absl::StrCat("capturing program \"", program->name,
                     "\" into a CUDA graph failed: ", status.message());
    if (!recoverable)
      return absl::Status(
          status.code(),
          absl::StrCat(why, "; a stream was left capturing, so nothing more "
                            "can run (run with --cuda-graphs=off)"));
    // Nothing of the program ran: run it eagerly now, and from now on.
    std::fprintf(stderr,
                 "braid-run: note: %s; the program runs without a graph\n",
                 why.c_str());
    program->policy.refuse(why);
    action = GraphPolicy::Action::kEager;
    status = enqueue(*program, contexts.data(), false);
    if (status.ok())
      ++stats_.eagerRuns;
    break;
  }
  case GraphPolicy::Action::kReplay:
    BRAID_CUDA_TRY(cudaGraphLaunch(program->graph.get(), stream(0)));
    ++stats_.graphReplays;
    status = absl::OkStatus();
    break;
  }
  program->policy.ran(action, kEpoch, status.ok());
  if (status.ok()) {
    // The program's stage and readback copies use the staging block.
    BRAID_CUDA_TRY(cudaEventRecord(stagingDone_.get(), stream(0)));
    stagingPending_ = true;
  }
  return status;
}

absl::Status CudaDevice::capture(Program &program,
                                 const KernelContext *contexts,
                                 bool *recoverable) {
  *recoverable = true;
  BRAID_CUDA_TRY(
      cudaStreamBeginCapture(stream(0), cudaStreamCaptureModeThreadLocal));
  absl::Status enqueued = enqueue(program, contexts, /*profiling=*/false);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream(0), &graph);
  CudaGraph owned(graph);
  // Ending the capture on its origin ends it for every stream that joined;
  // a stream still capturing would swallow whatever is enqueued next.
  for (uint32_t s : program.streams) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream(s), &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusNone)
      *recoverable = false;
  }
  // A failed capture leaves its error behind; it has been taken into
  // `enqueued` or `ended`.
  (void)cudaGetLastError();
  if (!enqueued.ok())
    return enqueued;
  if (ended != cudaSuccess) {
    const absl::Status s = cudaStatus(ended, "cudaStreamEndCapture");
    return absl::Status(
        s.code(), absl::StrCat(s.message(),
                               " (a kernel synchronised, allocated or used "
                               "the legacy default stream while it was "
                               "captured)"));
  }
  cudaGraphExec_t exec = nullptr;
  BRAID_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  CudaGraphExec ownedExec(exec);
  BRAID_CUDA_TRY(cudaGraphLaunch(exec, stream(0)));
  program.graph = std::move(ownedExec);
  return absl::OkStatus();
}

absl::Status CudaDevice::launchError(const Program &program,
                                     cudaError_t err) const {
  std::string message = absl::StrCat(
      "launching the kernels of program \"", program.name, "\" on ",
      info_.name, " failed: ", cudaGetErrorString(err), " (",
      cudaGetErrorName(err), ")");
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx ||
      err == cudaErrorUnsupportedPtxVersion)
    absl::StrAppend(&message,
                    "; this build's CUDA kernels do not run on compute "
                    "capability ",
                    ccMajor_, ".", ccMinor_,
                    " (rebuild with -DCMAKE_CUDA_ARCHITECTURES=", ccMajor_,
                    ccMinor_, ")");
  return absl::InternalError(std::move(message));
}

absl::Status CudaDevice::waitError(std::string_view what,
                                   cudaError_t err) const {
  const absl::Status s = cudaStatus(err, what);
  return absl::Status(
      s.code(),
      absl::StrCat("waiting for the work started on ", info_.name, ": ",
                   s.message(),
                   "; a kernel launched since the last wait may be the "
                   "cause (run with --cuda-graphs=off and "
                   "CUDA_LAUNCH_BLOCKING=1 to find it)"));
}

absl::StatusOr<std::vector<float>> CudaDevice::readbacks() {
  if (cudaError_t err = cudaStreamSynchronize(stream(0)); err != cudaSuccess)
    return waitError("cudaStreamSynchronize", err);
  stagingPending_ = false;
  std::vector<float> out(layout_.numReadbacks());
  if (!out.empty())
    std::memcpy(out.data(),
                static_cast<const uint8_t *>(staging_.get()) +
                    layout_.readbackOffset(0),
                out.size() * sizeof(float));
  return out;
}

} // namespace

absl::StatusOr<std::unique_ptr<DeviceBackend>>
createCudaDevice(const LoadedPlan &plan, bool cudaGraphs) {
  if (plan.device != Device::kCUDA)
    return absl::InvalidArgumentError(
        "the plan was loaded for the CPU; load it for Device::kCUDA to run "
        "it on a GPU");
  absl::StatusOr<CudaGpu> gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  auto device = std::make_unique<CudaDevice>(plan, cudaGraphs);
  if (absl::Status s = device->init(*gpu); !s.ok())
    return s;
  return std::unique_ptr<DeviceBackend>(std::move(device));
}

} // namespace braid
