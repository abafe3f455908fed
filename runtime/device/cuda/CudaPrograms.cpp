// The CUDA device's programs (CudaDeviceImpl.h): the executor's target on
// CUDA streams (with kernel timing while profiling), and capturing and
// replaying a program as a CUDA graph.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/CudaDeviceImpl.h"
#include "runtime/device/cuda/CudaStatus.h"

namespace braid::cuda_device {

namespace {

bool communicates(const Executor::Program &program) {
  for (const Executor::Op &op : program.ops)
    if (op.kind == LoadedInstruction::Kind::kCollective ||
        op.kind == LoadedInstruction::Kind::kSend ||
        op.kind == LoadedInstruction::Kind::kRecv)
      return true;
  return false;
}

} // namespace

absl::Status CudaDevice::bindPrograms() {
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(
      plan_, at(0), plan_.proto.memory().arena_bytes(),
      static_cast<uint8_t *>(hostArena_.get()), hostArenaBytes(),
      static_cast<uint8_t *>(staging_.get()), layout_,
      ranks_ ? MicroBatchMap{ranks_->dpSize(), ranks_->dpRank()}
             : MicroBatchMap{});
  if (!executor.ok())
    return executor.status();
  executor_ = std::move(*executor);
  hostStreams_ = !plan_.proto.host_streams().empty();
  hostContext_.pool = &hostPool_;
  hostValueArgs_.resize(kStepSlots);
  programs_.reserve(executor_->programs().size());
  for (const Executor::Program &bound : executor_->programs()) {
    Program &program = programs_.emplace_back();
    program.bound = &bound;
    program.policy = GraphPolicy(cudaGraphs_);
    // CudaDevice.h: the watchdog needs the events the host enqueues around
    // each collective and transfer, which a replay would not.
    if (communicates(bound))
      program.policy.refuse(absl::StrCat(
          "program \"", bound.name,
          "\" runs collectives or transfers, whose watchdog needs them "
          "enqueued from the host"));
    for (uint32_t i = 0; i < bound.numSignals; ++i) {
      cudaEvent_t e = nullptr;
      BRAID_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      program.signals.emplace_back(e);
    }
  }
  return absl::OkStatus();
}

// The executor's target: every instruction goes onto its CUDA stream, from
// this one host thread. A record is a CUDA event of its signal slot; a wait
// waits for that event, which was recorded before (the executor issues in
// program order, and a wait's record comes earlier). While profiling,
// stream 0's launches are bracketed by timing events; while tracing, each
// mark records an event of its own on its stream.
class CudaDevice::Streams final : public StreamTarget {
public:
  Streams(CudaDevice &device, Program &program, const KernelContext *contexts,
          bool profiling, bool tracing)
      : device_(device), program_(program), contexts_(contexts),
        profiling_(profiling), tracing_(tracing) {}

  // The kernels timed, in launch order.
  const std::vector<const KernelDef *> &timed() const { return timed_; }
  // The marks timed, in issue order (mark k's event is markEvents_[k]).
  const std::vector<TimedMark> &marked() const { return marked_; }

  const KernelContext &context(uint32_t stream) override {
    return contexts_[stream];
  }

  absl::Status launch(uint32_t s, const KernelDef &kernel,
                      const KernelArgs &args) override {
    if (device_.plan_.isHostStream(s)) {
      // The CPU kernel (the loader resolved it so) over the pinned host
      // arena, run by a host function in the stream's order.
      auto &launches = program_.hostLaunches;
      if (hostIssued_ == launches.size()) {
        auto made = std::make_unique<HostLaunch>();
        made->device = &device_;
        made->kernel = &kernel;
        made->args = args;
        made->args.ctx = &device_.hostContext_;
        launches.push_back(std::move(made));
      }
      HostLaunch *launch = launches[hostIssued_++].get();
      BRAID_CUDA_TRY(
          cudaLaunchHostFunc(device_.stream(s), runHostLaunch, launch));
      return absl::OkStatus();
    }
    const bool time = profiling_ && s == 0;
    auto &timers = device_.timers_;
    if (time) {
      if (timed_.size() == timers.size()) {
        cudaEvent_t a = nullptr, b = nullptr;
        BRAID_CUDA_TRY(cudaEventCreate(&a));
        BRAID_CUDA_TRY(cudaEventCreate(&b));
        timers.emplace_back(CudaEvent(a), CudaEvent(b));
      }
      BRAID_CUDA_TRY(cudaEventRecord(timers[timed_.size()].first.get(),
                                     device_.stream(0)));
    }
    kernel.run(args);
    if (time) {
      BRAID_CUDA_TRY(cudaEventRecord(timers[timed_.size()].second.get(),
                                     device_.stream(0)));
      timed_.push_back(&kernel);
    }
    return absl::OkStatus();
  }

  absl::Status copy(uint32_t s, CopyDirection direction, uint8_t *to,
                    const uint8_t *from, uint64_t bytes) override {
    BRAID_CUDA_TRY(cudaMemcpyAsync(to, from, bytes,
                                   direction == CopyDirection::kToDevice
                                       ? cudaMemcpyHostToDevice
                                       : cudaMemcpyDeviceToHost,
                                   device_.stream(s)));
    return absl::OkStatus();
  }

  absl::Status record(uint32_t s, const EventSignal &signal) override {
    BRAID_CUDA_TRY(cudaEventRecord(program_.signals[signal.slot].get(),
                                   device_.stream(s)));
    return absl::OkStatus();
  }

  absl::Status wait(uint32_t s, const EventSignal &signal) override {
    BRAID_CUDA_TRY(cudaStreamWaitEvent(
        device_.stream(s), program_.signals[signal.slot].get(), 0));
    return absl::OkStatus();
  }

  absl::Status collective(uint32_t s, const CollectiveCall &call) override {
    // The plan's axis enum (TP = 1 ...) is MeshAxis + 1.
    const int axis = static_cast<int>(call.axis) - 1;
    if (call.axis == plan::DP_CP)
      return absl::UnimplementedError(absl::StrCat(
          "program \"", program_.bound->name,
          "\" sums over context parallel's gradient group (dp_cp), which "
          "has no device communicator yet; train context-parallel plans on "
          "the CPU"));
    if (call.axis == plan::EP || call.axis == plan::EDP)
      return absl::UnimplementedError(absl::StrCat(
          "program \"", program_.bound->name,
          "\" runs expert parallel's collectives (",
          plan::MeshAxis_Name(call.axis),
          "), which have no device communicator yet; train expert-parallel "
          "plans on the CPU"));
    DeviceCommunicator *comm =
        axis >= 0 && axis < kNumMeshAxes ? device_.comms_[axis] : nullptr;
    if (comm == nullptr)
      return absl::FailedPreconditionError(absl::StrCat(
          "program \"", program_.bound->name,
          "\" runs a collective over axis ", plan::MeshAxis_Name(call.axis),
          ", but this device was made without device communicators "
          "(attachDeviceCommunicators)"));
    return runCollective(*comm, call, device_.stream(s));
  }

  absl::Status transfer(uint32_t s, const TransferCall &call) override {
    DeviceCommunicator *comm =
        call.channel < 2 ? device_.channels_[call.channel] : nullptr;
    if (comm == nullptr)
      return absl::FailedPreconditionError(absl::StrCat(
          "program \"", program_.bound->name, "\" ",
          call.send ? "sends" : "receives", " on pipeline channel ",
          call.channel,
          ", but this device was made without its device communicator "
          "(attachDeviceCommunicators)"));
    return runTransfer(*comm, call, device_.stream(s));
  }

  absl::Status mark(uint32_t s, const MarkCall &call) override {
    if (!tracing_)
      return absl::OkStatus();
    auto &events = device_.markEvents_;
    if (marked_.size() == events.size()) {
      cudaEvent_t e = nullptr;
      BRAID_CUDA_TRY(cudaEventCreate(&e));
      events.emplace_back(e);
    }
    BRAID_CUDA_TRY(
        cudaEventRecord(events[marked_.size()].get(), device_.stream(s)));
    marked_.push_back({call, s});
    return absl::OkStatus();
  }

private:
  CudaDevice &device_;
  Program &program_;
  const KernelContext *contexts_;
  const bool profiling_;
  const bool tracing_;
  std::vector<const KernelDef *> timed_;
  std::vector<TimedMark> marked_;
  // Host-stream launches issued so far in this run.
  size_t hostIssued_ = 0;
};

void CUDART_CB CudaDevice::runHostLaunch(void *launch) {
  const auto *h = static_cast<const HostLaunch *>(launch);
  std::lock_guard<std::mutex> lock(h->device->hostMutex_);
  h->kernel->run(h->args);
}

void CUDART_CB CudaDevice::setHostValues(void *values) {
  const auto *v = static_cast<const HostValues *>(values);
  CudaDevice &d = *v->device;
  std::lock_guard<std::mutex> lock(d.hostMutex_);
  const StepValues &s = *v->values;
  d.hostContext_.step = s.step;
  d.hostContext_.update = s.update;
  d.hostContext_.lr = s.lr;
  d.hostContext_.seed = s.seed;
  d.hostContext_.tpRank = s.tpRank;
  d.hostContext_.tpSize = s.tpSize;
  d.hostContext_.cpRank = s.cpRank;
  d.hostContext_.cpSize = s.cpSize;
  d.hostContext_.epRank = s.epRank;
}

// Fork from stream 0, the program's instructions, join back into stream 0.
// Eager or under capture alike: nothing here may synchronise with the host,
// except in a traced run (always eager), which waits for its origin first
// and for the program at the end.
absl::Status CudaDevice::enqueue(Program &program,
                                 const KernelContext *contexts,
                                 bool profiling, ScheduleTrace *trace) {
  const std::vector<uint32_t> &streams = program.bound->streams;
  // Kernel launches report errors only through cudaGetLastError: start from
  // a clean slate, so that the check below sees this program's launches.
  (void)cudaGetLastError();
  // A traced run's marks are timed from an origin whose host time is known:
  // the host waits for it before it issues the program.
  ScheduleTrace::Clock::time_point origin;
  if (trace != nullptr) {
    if (!markOrigin_) {
      cudaEvent_t e = nullptr;
      BRAID_CUDA_TRY(cudaEventCreate(&e));
      markOrigin_ = CudaEvent(e);
    }
    BRAID_CUDA_TRY(cudaEventRecord(markOrigin_.get(), stream(0)));
    if (absl::Status s = hostWait(markOrigin_.get(), "the trace's origin");
        !s.ok())
      return s;
    origin = ScheduleTrace::Clock::now();
  }
  BRAID_CUDA_TRY(cudaEventRecord(fork_.get(), stream(0)));
  for (uint32_t s : streams)
    if (s != 0)
      BRAID_CUDA_TRY(cudaStreamWaitEvent(stream(s), fork_.get(), 0));
  Streams target(*this, program, contexts, profiling, trace != nullptr);
  if (absl::Status s = executor_->issue(*program.bound, target); !s.ok())
    return s;
  for (uint32_t s : streams) {
    if (s == 0)
      continue;
    BRAID_CUDA_TRY(cudaEventRecord(joins_[s].get(), stream(s)));
    BRAID_CUDA_TRY(cudaStreamWaitEvent(stream(0), joins_[s].get(), 0));
  }
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    return launchError(program, err);
  const std::vector<const KernelDef *> &timed = target.timed();
  if (profiling && !timed.empty()) {
    if (absl::Status s = hostWaitStream(0); !s.ok())
      return s;
    for (size_t k = 0; k < timed.size(); ++k) {
      float ms = 0;
      BRAID_CUDA_TRY(cudaEventElapsedTime(&ms, timers_[k].first.get(),
                                          timers_[k].second.get()));
      profile_->add(timed[k]->name, ms / 1000.0);
    }
  }
  if (trace != nullptr && !target.marked().empty())
    return timeMarks(target.marked(), origin, *trace);
  return absl::OkStatus();
}

absl::Status CudaDevice::timeMarks(const std::vector<TimedMark> &marked,
                                   ScheduleTrace::Clock::time_point origin,
                                   ScheduleTrace &trace) {
  if (absl::Status s = hostWaitStream(0); !s.ok())
    return s;
  const double originSeconds =
      std::chrono::duration<double>(origin.time_since_epoch()).count();
  // Pairs each stream's begin with its end (the loader checked that they
  // alternate).
  std::map<uint32_t, std::pair<MarkCall, double>> open;
  for (size_t k = 0; k < marked.size(); ++k) {
    float ms = 0;
    BRAID_CUDA_TRY(cudaEventElapsedTime(&ms, markOrigin_.get(),
                                        markEvents_[k].get()));
    const double at = originSeconds + ms / 1000.0;
    const TimedMark &m = marked[k];
    if (!m.call.end) {
      open[m.stream] = {m.call, at};
      continue;
    }
    auto begun = open.find(m.stream);
    if (begun == open.end())
      continue;
    ScheduleTrace::Span span;
    span.stream = m.stream;
    span.part = m.call.part;
    span.stage = m.call.stage;
    span.microBatch = m.call.microBatch;
    span.begin = begun->second.second;
    span.end = at;
    span.cpu = at - span.begin;
    trace.addSpan(span);
    open.erase(begun);
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::run(plan::ProgramKind kind, const StepValues &values) {
  absl::StatusOr<const Executor::Program *> bound = executor_->program(kind);
  if (!bound.ok())
    return bound.status();
  Program *program = &programs_[*bound - executor_->programs().data()];
  if (absl::Status s = copyIn(values); !s.ok())
    return s;
  for (DeviceCommunicator *c : watched_)
    c->setOrigin(absl::StrCat("step ", values.step, ", program \"",
                              program->bound->name, "\""));

  // Kernels read the per-run values from gpu->stepValues; the host copies
  // below serve kernels that only size their launches from them.
  std::vector<KernelContext> contexts(gpuContexts_.size());
  for (size_t s = 0; s < contexts.size(); ++s) {
    contexts[s].step = values.step;
    contexts[s].update = values.update;
    contexts[s].lr = values.lr;
    contexts[s].seed = values.seed;
    contexts[s].tpRank = values.tpRank;
    contexts[s].tpSize = values.tpSize;
    contexts[s].cpRank = values.cpRank;
    contexts[s].cpSize = values.cpSize;
    contexts[s].epRank = values.epRank;
    contexts[s].gpu = &gpuContexts_[s];
  }

  // The arena is allocated once, so every graph stays valid: epoch 0.
  constexpr uint64_t kEpoch = 0;
  const bool profiling = profile_ != nullptr;
  ScheduleTrace *trace = kind == plan::STEP ? trace_ : nullptr;
  GraphPolicy::Action action =
      program->policy.next(kEpoch, profiling || trace != nullptr);
  absl::Status status;
  switch (action) {
  case GraphPolicy::Action::kEager:
    status = enqueue(*program, contexts.data(), profiling, trace);
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
        absl::StrCat("capturing program \"", program->bound->name,
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
  for (uint32_t s : program.bound->streams) {
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
