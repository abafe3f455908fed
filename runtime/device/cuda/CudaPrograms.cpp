// The CUDA device's programs (CudaDeviceImpl.h): binding a loaded program
// to device memory, enqueueing it on the streams (with kernel timing while
// profiling), and capturing and replaying it as a CUDA graph.
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/CudaDeviceImpl.h"
#include "runtime/device/cuda/CudaStatus.h"
#include "runtime/device/cuda/StreamSchedule.h"
#include "runtime/plan/RepeatWalk.h"

namespace braid::cuda_device {

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
      } else if (inst.kind == LoadedInstruction::Kind::kStage ||
                 inst.kind == LoadedInstruction::Kind::kReadback) {
        op.copy = layout_.bind(
            inst, static_cast<uint8_t *>(view(inst.tensor).data), host);
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
      BRAID_CUDA_TRY(cudaMemcpyAsync(
          op.copy.destination(iteration), op.copy.source(iteration),
          op.copy.bytes, cudaMemcpyHostToDevice, stream(op.stream)));
      break;
    case LoadedInstruction::Kind::kReadback:
      BRAID_CUDA_TRY(cudaMemcpyAsync(
          op.copy.destination(iteration), op.copy.source(iteration),
          op.copy.bytes, cudaMemcpyDeviceToHost, stream(op.stream)));
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
      break; // forEachRun runs the body
    }
    return absl::OkStatus();
  };
  if (absl::Status s = forEachRun(program.ops, issue); !s.ok())
    return s;
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

} // namespace braid::cuda_device
