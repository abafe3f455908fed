#include "runtime/comm/nccl/NcclCommunicator.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/Ranks.h"
#include "runtime/comm/nccl/NcclApi.h"
#include "runtime/comm/nccl/PendingCalls.h"
#include "runtime/device/cuda/CudaStatus.h"

namespace braid::nccl {
namespace {

// One call of a group, for the watchdog's description of the group.
struct Part {
  std::string kind;   // "all-reduce"
  std::string amount; // "4096 f32"
};

// "all-reduce of 4096 f32"; "all-reduce of 3 tensors (4096 f32, 10 f32,
// 10 f32)"; "group of 2 calls (all-reduce of 10 f32, broadcast of 8
// bytes)". At most kListed parts are listed.
std::string describeParts(const std::vector<Part> &parts) {
  constexpr size_t kListed = 4;
  if (parts.empty())
    return "empty group";
  if (parts.size() == 1)
    return absl::StrCat(parts[0].kind, " of ", parts[0].amount);
  bool oneKind = true;
  for (const Part &p : parts)
    oneKind = oneKind && p.kind == parts[0].kind;
  std::vector<std::string> listed;
  for (size_t i = 0; i < parts.size() && i < kListed; ++i)
    listed.push_back(oneKind ? parts[i].amount
                             : absl::StrCat(parts[i].kind, " of ",
                                            parts[i].amount));
  if (parts.size() > kListed)
    listed.push_back("...");
  return oneKind ? absl::StrCat(parts[0].kind, " of ", parts.size(),
                                " tensors (", absl::StrJoin(listed, ", "), ")")
                 : absl::StrCat("group of ", parts.size(), " calls (",
                                absl::StrJoin(listed, ", "), ")");
}

std::string elements(size_t count, DType dtype) {
  return absl::StrCat(count, " ", std::string(dtypeName(dtype)));
}

class NcclCommunicator final : public DeviceCommunicator {
public:
  NcclCommunicator(const NcclApi &api, CommHandle comm, std::string name,
                   int rank, int size, std::chrono::milliseconds timeout)
      : api_(api), comm_(comm), name_(std::move(name)), rank_(rank),
        size_(size), pending_(timeout) {}

  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      // Calls still running (the device waited for its streams before it
      // went) would make ncclCommDestroy wait for them: abort instead.
      (void)update();
      if (pending_.empty())
        api_.commDestroy(comm_);
      else
        api_.commAbort(comm_);
    }
    pending_.clear([this](void *e) { release(e); });
    for (cudaEvent_t e : freeEvents_)
      (void)cudaEventDestroy(e);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }
  void setOrigin(std::string origin) override { origin_ = std::move(origin); }

  absl::Status allReduceSum(void *data, size_t count, DType dtype,
                            void *stream) override {
    if (absl::Status s = summable(dtype, "all-reduce"); !s.ok())
      return s;
    return enqueue({"all-reduce", elements(count, dtype)}, stream, count, [&] {
      return api_.allReduce(data, data, count, dataType(dtype), kSum, comm_,
                            stream);
    });
  }

  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype, void *stream) override {
    if (absl::Status s = summable(dtype, "reduce-scatter"); !s.ok())
      return s;
    return enqueue({"reduce-scatter", elements(count, dtype)}, stream, count,
                   [&] {
                     return api_.reduceScatter(in, out, count, dataType(dtype),
                                               kSum, comm_, stream);
                   });
  }

  absl::Status allGather(const void *in, void *out, size_t count, DType dtype,
                         void *stream) override {
    return enqueue({"all-gather", elements(count, dtype)}, stream, count, [&] {
      return api_.allGather(in, out, count, dataType(dtype), comm_, stream);
    });
  }

  absl::Status broadcast(void *data, size_t bytes, int root,
                         void *stream) override {
    return enqueue({"broadcast", absl::StrCat(bytes, " bytes from rank ", root)},
                   stream, bytes, [&] {
                     return api_.broadcast(data, data, bytes, kUint8, root,
                                           comm_, stream);
                   });
  }

  absl::Status send(const void *data, size_t bytes, int peer,
                    void *stream) override {
    return enqueue({"send", absl::StrCat(bytes, " bytes to rank ", peer)},
                   stream, bytes, [&] {
                     return api_.send(data, bytes, kUint8, peer, comm_, stream);
                   });
  }

  absl::Status recv(void *data, size_t bytes, int peer,
                    void *stream) override {
    return enqueue({"recv", absl::StrCat(bytes, " bytes from rank ", peer)},
                   stream, bytes, [&] {
                     return api_.recv(data, bytes, kUint8, peer, comm_, stream);
                   });
  }

  absl::Status beginGroup() override {
    if (!aborted_.ok())
      return aborted_;
    if (grouping_)
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ": a group was begun inside another"));
    if (Result r = api_.groupStart(); r != kSuccess)
      return absl::InternalError(absl::StrCat(
          "ncclGroupStart in ", name_, " failed: ", api_.describe(r, comm_)));
    grouping_ = true;
    group_ = Group{};
    return absl::OkStatus();
  }

  absl::Status endGroup() override {
    if (!grouping_)
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ": a group was ended that was not begun"));
    grouping_ = false;
    Group group = std::move(group_);
    const Result r = api_.groupEnd();
    if (r != kSuccess) {
      release(group.start);
      return absl::InternalError(absl::StrCat(
          "launching the ", describeParts(group.parts), " in ", name_,
          " failed: ", api_.describe(r, comm_)));
    }
    if (group.parts.empty()) {
      release(group.start);
      return absl::OkStatus();
    }
    return track(describeParts(group.parts), group.start, group.stream);
  }

  absl::Status poll() override {
    if (!aborted_.ok())
      return aborted_;
    Result async = kSuccess;
    if (Result r = api_.commGetAsyncError(comm_, &async); r != kSuccess)
      async = r;
    if (async != kSuccess && async != kInProgress) {
      const std::string what =
          pending_.empty()
              ? absl::StrCat("a call in ", name_)
              : describeCall(pending_.oldest(), name_);
      return abort(absl::InternalError(
          absl::StrCat(what, " failed: NCCL reported ",
                       api_.describe(async, comm_),
                       "; the NCCL communicator was aborted")));
    }
    absl::StatusOr<const PendingCalls::Call *> late = update();
    if (!late.ok())
      return late.status();
    if (*late != nullptr)
      return abort(pending_.timeoutError(**late, name_));
    return absl::OkStatus();
  }

private:
  struct Group {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    std::vector<Part> parts;
  };

  absl::Status summable(DType dtype, const char *what) const {
    if (dtype == DType::kBF16)
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": the ", what, " sums f32 or i32, not bf16"));
    return absl::OkStatus();
  }

  // Enqueues one call on `stream`: NCCL's `call` between a start and a
  // done event, or, inside a group, after the group's start event. Empty
  // calls are left out.
  template <typename Call>
  absl::Status enqueue(Part part, void *stream, size_t count, Call &&call) {
    if (!aborted_.ok())
      return aborted_;
    if (count == 0)
      return absl::OkStatus();
    auto *s = static_cast<cudaStream_t>(stream);
    cudaEvent_t start = nullptr;
    if (grouping_) {
      if (group_.parts.empty()) {
        absl::StatusOr<cudaEvent_t> e = record(s);
        if (!e.ok())
          return e.status();
        group_.start = *e;
        group_.stream = s;
      } else if (group_.stream != s) {
        return absl::InvalidArgumentError(absl::StrCat(
            name_, ": the calls of a group must share one stream"));
      }
    } else {
      absl::StatusOr<cudaEvent_t> e = record(s);
      if (!e.ok())
        return e.status();
      start = *e;
    }
    if (Result r = call(); r != kSuccess) {
      if (start != nullptr)
        release(start);
      return absl::InternalError(absl::StrCat(
          "enqueueing the ", part.kind, " of ", part.amount, " in ", name_,
          " failed: ", api_.describe(r, comm_)));
    }
    if (grouping_) {
      group_.parts.push_back(std::move(part));
      return absl::OkStatus();
    }
    return track(absl::StrCat(part.kind, " of ", part.amount), start, s);
  }

  // Books a call enqueued after `start` on `stream`.
  absl::Status track(std::string what, cudaEvent_t start,
                     cudaStream_t stream) {
    absl::StatusOr<cudaEvent_t> done = record(stream);
    if (!done.ok()) {
      release(start);
      return done.status();
    }
    pending_.add({std::move(what), origin_, start, *done, std::nullopt});
    return absl::OkStatus();
  }

  absl::StatusOr<cudaEvent_t> record(cudaStream_t stream) {
    cudaEvent_t e = nullptr;
    if (!freeEvents_.empty()) {
      e = freeEvents_.back();
      freeEvents_.pop_back();
    } else if (absl::Status s = cudaStatus(
                   cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                   "cudaEventCreateWithFlags");
               !s.ok()) {
      return s;
    }
    if (absl::Status s = cudaStatus(cudaEventRecord(e, stream),
                                    "cudaEventRecord");
        !s.ok()) {
      release(e);
      return s;
    }
    return e;
  }

  void release(void *e) {
    if (e != nullptr)
      freeEvents_.push_back(static_cast<cudaEvent_t>(e));
  }

  absl::StatusOr<const PendingCalls::Call *> update() {
    return pending_.update(
        [this](void *marker) -> absl::StatusOr<bool> {
          const cudaError_t err =
              cudaEventQuery(static_cast<cudaEvent_t>(marker));
          if (err == cudaSuccess)
            return true;
          if (err == cudaErrorNotReady)
            return false;
          (void)cudaGetLastError();
          return absl::InternalError(absl::StrCat(
              "waiting for a call in ", name_, ": ",
              cudaStatus(err, "cudaEventQuery").message()));
        },
        PendingCalls::Clock::now(), [this](void *e) { release(e); });
  }

  // Aborts the communicator for good with `why`, which it returns.
  absl::Status abort(absl::Status why) {
    api_.commAbort(comm_);
    comm_ = nullptr;
    pending_.clear([this](void *e) { release(e); });
    aborted_ = why;
    return why;
  }

  const NcclApi &api_;
  CommHandle comm_;
  std::string name_;
  int rank_, size_;
  PendingCalls pending_;
  std::string origin_;
  std::vector<cudaEvent_t> freeEvents_;
  bool grouping_ = false;
  Group group_;
  absl::Status aborted_;
};

// The id rank 0 broadcasts, with whether it could make one.
struct Bootstrap {
  int32_t ok = 0;
  UniqueId id{};
};

} // namespace

absl::StatusOr<std::unique_ptr<DeviceCommunicator>>
createNcclCommunicator(Communicator &host, int cudaDevice,
                       std::chrono::milliseconds timeout) {
  absl::StatusOr<const NcclApi *> loaded = loadNccl();
  int32_t failures = loaded.ok() ? 0 : 1;
  if (absl::Status s = host.allReduceSum(&failures, 1, DType::kI32); !s.ok())
    return s;
  if (!loaded.ok())
    return loaded.status();
  if (failures > 0)
    return absl::FailedPreconditionError(absl::StrCat(
        failures, " rank", failures == 1 ? "" : "s", " of ", host.name(),
        " could not load NCCL (each says why)"));
  const NcclApi &api = **loaded;
  if (absl::Status s = cudaStatus(cudaSetDevice(cudaDevice), "cudaSetDevice");
      !s.ok())
    return s;

  Bootstrap boot;
  std::string why;
  if (host.rank() == 0) {
    if (Result r = api.getUniqueId(&boot.id); r == kSuccess)
      boot.ok = 1;
    else
      why = api.describe(r);
  }
  if (absl::Status s = host.broadcast(&boot, sizeof(boot), 0); !s.ok())
    return s;
  if (!boot.ok)
    return absl::InternalError(absl::StrCat(
        "ncclGetUniqueId failed on rank 0 of ", host.name(),
        why.empty() ? "" : ": ", why));

  CommHandle comm = nullptr;
  if (Result r = api.commInitRank(&comm, host.size(), boot.id, host.rank());
      r != kSuccess)
    return absl::InternalError(absl::StrCat(
        "ncclCommInitRank for ", host.name(), " (NCCL ", api.versionText(),
        ", ", api.libraryName, ") failed: ", api.describe(r)));
  return std::unique_ptr<DeviceCommunicator>(new NcclCommunicator(
      api, comm, host.name(), host.rank(), host.size(), timeout));
}

absl::StatusOr<std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes>>
createNcclCommunicators(const Ranks &ranks, int cudaDevice,
                        std::chrono::milliseconds timeout) {
  std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes> out;
  for (MeshAxis axis : kMeshAxes) {
    absl::StatusOr<std::unique_ptr<DeviceCommunicator>> comm =
        createNcclCommunicator(ranks.axis(axis), cudaDevice, timeout);
    if (!comm.ok())
      return comm.status();
    out[static_cast<int>(axis)] = std::move(*comm);
  }
  return out;
}

} // namespace braid::nccl
