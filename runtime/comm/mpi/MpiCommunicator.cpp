#include "runtime/comm/mpi/MpiCommunicator.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braid::mpi {
namespace {

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(const MpiApi &api, MPI_Comm comm, std::string name,
                  std::chrono::milliseconds timeout)
      : api_(api), comm_(comm), name_(std::move(name)), timeout_(timeout) {
    api_.commRank(comm_, &rank_);
    api_.commSize(comm_, &size_);
  }
  ~MpiCommunicator() override { api_.commFree(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }

  absl::Status allReduceSum(void *data, size_t count, DType dtype) override {
    absl::StatusOr<MPI_Datatype> type = summable(dtype, "all-reduce");
    if (!type.ok())
      return type.status();
    // MPI counts are ints: reduce in pieces of at most 2^30 elements.
    constexpr size_t kPiece = size_t{1} << 30;
    auto *bytes = static_cast<uint8_t *>(data);
    for (size_t done = 0; done < count; done += kPiece) {
      const size_t n = std::min(kPiece, count - done);
      MPI_Request request;
      if (absl::Status s = check(
              api_.iallreduce(MPI_IN_PLACE, bytes + done * dtypeSize(dtype),
                              static_cast<int>(n), *type, api_.sum, comm_,
                              &request),
              "all-reduce", n, dtype);
          !s.ok())
        return s;
      if (absl::Status s = complete(request, "all-reduce", n, dtype); !s.ok())
        return s;
    }
    return absl::OkStatus();
  }

  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype) override {
    absl::StatusOr<MPI_Datatype> type = summable(dtype, "reduce-scatter");
    if (!type.ok())
      return type.status();
    if (absl::Status s = fitsInt(count, "reduce-scatter"); !s.ok())
      return s;
    MPI_Request request;
    if (absl::Status s = check(
            api_.ireduceScatterBlock(in, out, static_cast<int>(count), *type,
                                     api_.sum, comm_, &request),
            "reduce-scatter", count, dtype);
        !s.ok())
      return s;
    return complete(request, "reduce-scatter", count, dtype);
  }

  absl::Status allGather(const void *in, void *out, size_t count,
                         DType dtype) override {
    if (absl::Status s = fitsInt(count, "all-gather"); !s.ok())
      return s;
    MPI_Datatype type = datatype(dtype);
    MPI_Request request;
    if (absl::Status s = check(api_.iallgather(in, static_cast<int>(count),
                                               type, out,
                                               static_cast<int>(count), type,
                                               comm_, &request),
                               "all-gather", count, dtype);
        !s.ok())
      return s;
    return complete(request, "all-gather", count, dtype);
  }

  absl::Status broadcast(void *data, size_t bytes, int root) override {
    if (absl::Status s = fitsInt(bytes, "broadcast"); !s.ok())
      return s;
    MPI_Request request;
    if (absl::Status s = check(api_.ibcast(data, static_cast<int>(bytes),
                                           api_.byte, root, comm_, &request),
                               "broadcast", bytes, std::nullopt);
        !s.ok())
      return s;
    return complete(request, "broadcast", bytes, std::nullopt);
  }

  absl::Status send(const void *data, size_t bytes, int peer,
                    int tag) override {
    if (absl::Status s = fitsInt(bytes, "send"); !s.ok())
      return s;
    MPI_Request request;
    if (absl::Status s =
            check(api_.isend(data, static_cast<int>(bytes), api_.byte, peer,
                             tag, comm_, &request),
                  "send", bytes, std::nullopt);
        !s.ok())
      return s;
    return complete(request, absl::StrCat("send to rank ", peer), bytes,
                    std::nullopt);
  }

  absl::Status recv(void *data, size_t bytes, int peer, int tag) override {
    if (absl::Status s = fitsInt(bytes, "recv"); !s.ok())
      return s;
    MPI_Request request;
    if (absl::Status s =
            check(api_.irecv(data, static_cast<int>(bytes), api_.byte, peer,
                             tag, comm_, &request),
                  "recv", bytes, std::nullopt);
        !s.ok())
      return s;
    return complete(request, absl::StrCat("recv from rank ", peer), bytes,
                    std::nullopt);
  }

private:
  MPI_Datatype datatype(DType dtype) const {
    switch (dtype) {
    case DType::kF32:
      return api_.float32;
    case DType::kI32:
      return api_.int32;
    case DType::kBF16:
      return api_.uint16;
    }
    return api_.byte;
  }

  absl::StatusOr<MPI_Datatype> summable(DType dtype,
                                        const char *what) const {
    if (dtype == DType::kBF16)
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": a ", what, " sums f32 or i32, not bf16"));
    return datatype(dtype);
  }

  absl::Status fitsInt(size_t count, const char *what) const {
    if (count > static_cast<size_t>(INT_MAX))
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": a ", what, " of ", count,
                       " elements exceeds MPI's count limit (2^31 - 1)"));
    return absl::OkStatus();
  }

  // "all-reduce of 4096 f32 in dp group 0 (ranks 0, 2)".
  std::string call(absl::string_view what, size_t count,
                   std::optional<DType> dtype) const {
    return absl::StrCat(what, " of ", count, " ",
                        dtype ? std::string(dtypeName(*dtype)) : std::string("bytes"), " in ",
                        name_);
  }

  absl::Status check(int code, absl::string_view what, size_t count,
                     std::optional<DType> dtype) const {
    if (code == MPI_SUCCESS)
      return absl::OkStatus();
    return absl::InternalError(absl::StrCat(
        "the ", call(what, count, dtype), " failed: ", api_.describe(code)));
  }

  // Polls `request` until it completes or the watchdog's deadline passes.
  absl::Status complete(MPI_Request &request, absl::string_view what,
                        size_t count, std::optional<DType> dtype) const {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto deadline = start + timeout_;
    for (int polls = 0;; ++polls) {
      int done = 0;
      if (absl::Status s = check(api_.test(&request, &done, MPI_STATUS_IGNORE),
                                 what, count, dtype);
          !s.ok())
        return s;
      if (done)
        return absl::OkStatus();
      const auto now = Clock::now();
      if (now >= deadline)
        return absl::DeadlineExceededError(absl::StrCat(
            "the ", call(what, count, dtype), " did not complete within ",
            timeout_.count() / 1000.0,
            " s: a rank of the group died, hangs or is making a different "
            "call (set the limit with --comm-timeout)"));
      // Spin briefly (MPI progresses inside MPI_Test), then back off, so
      // that a waiting stream leaves the core to the rank's compute.
      if (now - start < std::chrono::microseconds(100))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const MpiApi &api_;
  MPI_Comm comm_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
};

} // namespace

absl::StatusOr<std::unique_ptr<MpiWorld>> MpiWorld::init() {
  absl::StatusOr<const MpiApi *> api = loadMpi();
  if (!api.ok())
    return api.status();
  const MpiApi &mpi = **api;
  int provided = 0;
  int argc = 0;
  char **argv = nullptr;
  if (int code = mpi.initThread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
      code != MPI_SUCCESS)
    return absl::FailedPreconditionError(
        absl::StrCat("MPI_Init_thread failed: ", mpi.describe(code)));
  if (provided < MPI_THREAD_MULTIPLE) {
    mpi.finalize();
    return absl::FailedPreconditionError(absl::StrCat(
        mpi.libraryName, " offers thread level ", provided,
        ", not MPI_THREAD_MULTIPLE; CPU streams communicate from several "
        "threads"));
  }
  mpi.commSetErrhandler(mpi.commWorld, mpi.errorsReturn);
  int rank = 0, size = 1;
  mpi.commRank(mpi.commWorld, &rank);
  mpi.commSize(mpi.commWorld, &size);
  return std::unique_ptr<MpiWorld>(new MpiWorld(&mpi, rank, size));
}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  api_->finalized(&finalized);
  if (!finalized)
    api_->finalize();
}

absl::StatusOr<std::array<std::unique_ptr<Communicator>, kNumMeshAxes>>
MpiWorld::axisCommunicators(const MeshShape &shape,
                            std::chrono::milliseconds timeout) const {
  if (shape.worldSize() != size_)
    return absl::InvalidArgumentError(absl::StrCat(
        "the mesh ", shape.describe(), " has ", shape.worldSize(),
        " ranks but ", size_, " were started"));
  std::array<std::unique_ptr<Communicator>, kNumMeshAxes> out;
  for (MeshAxis axis : kMeshAxes) {
    const int64_t group = meshGroupIndex(shape, rank_, axis);
    const MeshCoords coords = meshCoords(shape, rank_);
    MPI_Comm comm = nullptr;
    if (int code = api_->commSplit(api_->commWorld, static_cast<int>(group),
                                   static_cast<int>(
                                       coords[static_cast<int>(axis)]),
                                   &comm);
        code != MPI_SUCCESS)
      return absl::InternalError(
          absl::StrCat("creating the ", meshAxisName(axis),
                       " communicators failed: ", api_->describe(code)));
    api_->commSetErrhandler(comm, api_->errorsReturn);
    std::vector<int64_t> members = meshGroup(shape, rank_, axis);
    std::string name =
        absl::StrCat(meshAxisName(axis), " group ", group, " (ranks ",
                     absl::StrJoin(members, ", "), ")");
    out[static_cast<int>(axis)] = std::make_unique<MpiCommunicator>(
        *api_, comm, std::move(name), timeout);
  }
  return out;
}

void MpiWorld::abort(int code) const {
  api_->abort(api_->commWorld, code);
  std::_Exit(code);
}

} // namespace braid::mpi
