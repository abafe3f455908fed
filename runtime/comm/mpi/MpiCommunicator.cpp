#include "runtime/comm/mpi/MpiCommunicator.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/TsanAccess.h"
#include "kernels/cpu/Storage.h"
#include "runtime/comm/RollCall.h"
#include "runtime/comm/mpi/ArrivalBoard.h"

namespace braid::mpi {
namespace {

// The bytes a call's MPI reads and writes of this rank's buffers.
struct Touched {
  const void *read = nullptr;
  size_t readBytes = 0;
  void *written = nullptr;
  size_t writtenBytes = 0;
};

// Tells ThreadSanitizer (a TSAN build only) of what MPI, which it does not
// instrument, does to the buffers, as if this thread did it: once when a
// call is posted and once when it completes, so that another thread's
// access between the two that no event orders with the call is reported.
void markAccess(const Touched &t) {
  tsanRead(t.read, t.readBytes);
  tsanWrite(t.written, t.writtenBytes);
}

// ThreadSanitizer sees the bytes MPI copies into a buffer (it intercepts
// memcpy) as written by whichever thread progressed MPI at that moment,
// which need not be the thread whose call it is: a pipeline's sends and
// receives wait on two streams' threads at once, and either may deliver
// the other's message. MPI's own locks, which order that copy before the
// owner sees the call complete, are invisible to it. In a TSAN build every
// MPI call of a communicator's wait is therefore made under one mutex,
// which it does see; elsewhere this is no lock at all.
class MpiCallOrder {
public:
#if BRAID_TSAN
  MpiCallOrder() : lock_(mutex()) {}

private:
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> lock_;
#endif
};

// One call, for messages: "all-reduce of 4096 f32".
struct Call {
  std::string what;
  size_t count = 0;
  std::optional<DType> dtype; // nullopt: count is in bytes
  // A send or recv: the peer's rank in the group, and the call it makes.
  int peer = -1;
  const char *matching = nullptr;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(const MpiApi &api, MPI_Comm comm, std::string name,
                  std::vector<int64_t> members,
                  std::chrono::milliseconds timeout)
      : api_(api), comm_(comm), name_(std::move(name)), members_(members),
        timeout_(timeout) {
    api_.commRank(comm_, &rank_);
    api_.commSize(comm_, &size_);
    if (size_ > 1)
      board_ = ArrivalBoard::create(api_, comm_, std::move(members), rank_);
  }
  ~MpiCommunicator() override {
    board_.reset(); // a window goes before its communicator
    api_.commFree(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }

  absl::Status allReduceSum(void *data, size_t count, DType dtype) override {
    if (dtype == DType::kBF16)
      return allReduceBf16(static_cast<uint16_t *>(data), count);
    absl::StatusOr<MPI_Datatype> type = summable(dtype, "all-reduce");
    if (!type.ok())
      return type.status();
    // MPI counts are ints: reduce in pieces of at most 2^30 elements.
    constexpr size_t kPiece = size_t{1} << 30;
    auto *bytes = static_cast<uint8_t *>(data);
    for (size_t done = 0; done < count; done += kPiece) {
      const size_t n = std::min(kPiece, count - done);
      uint8_t *piece = bytes + done * dtypeSize(dtype);
      if (absl::Status s = collective(
              Call{"all-reduce", n, dtype},
              Touched{piece, n * dtypeSize(dtype), piece, n * dtypeSize(dtype)},
              [&](MPI_Request *request) {
                return api_.iallreduce(MPI_IN_PLACE, piece, static_cast<int>(n),
                                       *type, api_.sum, comm_, request);
              });
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  }

  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype) override {
    if (dtype == DType::kBF16)
      return reduceScatterBf16(static_cast<const uint16_t *>(in),
                               static_cast<uint16_t *>(out), count);
    absl::StatusOr<MPI_Datatype> type = summable(dtype, "reduce-scatter");
    if (!type.ok())
      return type.status();
    if (absl::Status s = fitsInt(count, "reduce-scatter"); !s.ok())
      return s;
    const size_t bytes = count * dtypeSize(dtype);
    return collective(
        Call{"reduce-scatter", count, dtype},
        Touched{in, bytes * size_, out, bytes}, [&](MPI_Request *request) {
          return api_.ireduceScatterBlock(in, out, static_cast<int>(count),
                                          *type, api_.sum, comm_, request);
        });
  }

  absl::Status allGather(const void *in, void *out, size_t count,
                         DType dtype) override {
    if (absl::Status s = fitsInt(count, "all-gather"); !s.ok())
      return s;
    MPI_Datatype type = datatype(dtype);
    const size_t bytes = count * dtypeSize(dtype);
    return collective(
        Call{"all-gather", count, dtype},
        Touched{in, bytes, out, bytes * size_}, [&](MPI_Request *request) {
          return api_.iallgather(in, static_cast<int>(count), type, out,
                                 static_cast<int>(count), type, comm_, request);
        });
  }

  absl::Status broadcast(void *data, size_t bytes, int root) override {
    if (absl::Status s = fitsInt(bytes, "broadcast"); !s.ok())
      return s;
    // The root's buffer is only read.
    const Touched touched = rank_ == root ? Touched{data, bytes, nullptr, 0}
                                          : Touched{nullptr, 0, data, bytes};
    return collective(Call{"broadcast", bytes, std::nullopt}, touched,
                      [&](MPI_Request *request) {
                        return api_.ibcast(data, static_cast<int>(bytes),
                                           api_.byte, root, comm_, request);
                      });
  }

  // MPI's counts and displacements are ints: each rank's total must fit.
  absl::Status allToAllV(const void *in, const size_t *sendCounts, void *out,
                         const size_t *recvCounts, DType dtype) override {
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    size_t sent = 0, received = 0;
    for (int r = 0; r < size_; ++r) {
      sd[r] = static_cast<int>(sent);
      rd[r] = static_cast<int>(received);
      sc[r] = static_cast<int>(sendCounts[r]);
      rc[r] = static_cast<int>(recvCounts[r]);
      sent += sendCounts[r];
      received += recvCounts[r];
      if (absl::Status s = fitsInt(std::max(sent, received), "all-to-all");
          !s.ok())
        return s;
    }
    MPI_Datatype type = datatype(dtype);
    const size_t size = dtypeSize(dtype);
    return collective(Call{"all-to-all", sent, dtype},
                      Touched{in, sent * size, out, received * size},
                      [&](MPI_Request *request) {
                        return api_.ialltoallv(in, sc.data(), sd.data(), type,
                                               out, rc.data(), rd.data(), type,
                                               comm_, request);
                      });
  }

  absl::Status send(const void *data, size_t bytes, int peer,
                    int tag) override {
    if (absl::Status s = fitsInt(bytes, "send"); !s.ok())
      return s;
    return postAndWait(
        Call{absl::StrCat("send to group rank ", peer), bytes, std::nullopt, peer,
             "recv"},
        Touched{data, bytes, nullptr, 0}, [&](MPI_Request *request) {
          return api_.isend(data, static_cast<int>(bytes), api_.byte, peer, tag,
                            comm_, request);
        });
  }

  absl::Status recv(void *data, size_t bytes, int peer, int tag) override {
    if (absl::Status s = fitsInt(bytes, "recv"); !s.ok())
      return s;
    return postAndWait(
        Call{absl::StrCat("recv from group rank ", peer), bytes, std::nullopt, peer,
             "send"},
        Touched{nullptr, 0, data, bytes}, [&](MPI_Request *request) {
          return api_.irecv(data, static_cast<int>(bytes), api_.byte, peer, tag,
                            comm_, request);
        });
  }

  // Both transfers are posted before either is waited for, so that a ring
  // of blocking sends cannot deadlock; numbered as a collective, since
  // every rank of the group makes it.
  absl::Status shift(const void *in, void *out, size_t count, DType dtype,
                     int offset) override {
    const size_t bytes = count * dtypeSize(dtype);
    const int to = ((rank_ + offset) % size_ + size_) % size_;
    const int from = ((rank_ - offset) % size_ + size_) % size_;
    if (to == rank_) {
      if (in != out && bytes > 0)
        std::memmove(out, in, bytes);
      return absl::OkStatus();
    }
    if (absl::Status s = fitsInt(bytes, "shift"); !s.ok())
      return s;
    const Call call{absl::StrCat("shift by ", offset), count, dtype};
    const uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (board_)
      board_->enter(seq);
    const Touched touched{in, bytes, out, bytes};
    markAccess(touched);
    MPI_Request received, sent;
    int posted;
    {
      MpiCallOrder order;
      posted = api_.irecv(out, static_cast<int>(bytes), api_.byte, from,
                          kShiftTag, comm_, &received);
      if (posted == MPI_SUCCESS)
        posted = api_.isend(in, static_cast<int>(bytes), api_.byte, to,
                            kShiftTag, comm_, &sent);
    }
    if (absl::Status s = check(posted, call); !s.ok())
      return s;
    if (absl::Status s = complete(received, call, seq); !s.ok())
      return s;
    if (absl::Status s = complete(sent, call, seq); !s.ok())
      return s;
    markAccess(touched);
    if (board_)
      board_->leave(seq);
    return absl::OkStatus();
  }

private:
  // The tag of a shift's messages: each group's shifts are its only point
  // to point messages with one tag, so they match in program order.
  static constexpr int kShiftTag = 7;

  // MPI has no bf16 sum: every rank gathers the group's values and adds
  // them in f32 in rank order, rounding once, so all hold the same sum.
  absl::Status allReduceBf16(uint16_t *data, size_t count) {
    if (size_ == 1 || count == 0)
      return absl::OkStatus();
    std::vector<uint16_t> all(count * static_cast<size_t>(size_));
    if (absl::Status s = allGather(data, all.data(), count, DType::kBF16);
        !s.ok())
      return s;
    for (size_t i = 0; i < count; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < size_; ++r)
        sum += cpu::widen(all[static_cast<size_t>(r) * count + i]);
      data[i] = cpu::roundToBf16(sum);
    }
    return absl::OkStatus();
  }

  // Likewise for a reduce-scatter: every rank receives the group's values
  // of its part (an all-to-all) and adds them in f32 in rank order,
  // rounding once.
  absl::Status reduceScatterBf16(const uint16_t *in, uint16_t *out,
                                 size_t count) {
    if (size_ == 1 || count == 0) {
      if (in != out && count > 0)
        std::memmove(out, in, count * sizeof(uint16_t));
      return absl::OkStatus();
    }
    if (absl::Status s = fitsInt(count, "reduce-scatter"); !s.ok())
      return s;
    std::vector<uint16_t> parts(count * static_cast<size_t>(size_));
    const size_t bytes = count * sizeof(uint16_t);
    if (absl::Status s = collective(
            Call{"reduce-scatter", count, DType::kBF16},
            Touched{in, bytes * size_, parts.data(), bytes * size_},
            [&](MPI_Request *request) {
              return api_.ialltoall(in, static_cast<int>(count), api_.uint16,
                                    parts.data(), static_cast<int>(count),
                                    api_.uint16, comm_, request);
            });
        !s.ok())
      return s;
    for (size_t i = 0; i < count; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < size_; ++r)
        sum += cpu::widen(parts[static_cast<size_t>(r) * count + i]);
      out[i] = cpu::roundToBf16(sum);
    }
    return absl::OkStatus();
  }

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
  std::string describe(const Call &call) const {
    return absl::StrCat(call.what, " of ", call.count, " ",
                        call.dtype ? std::string(dtypeName(*call.dtype))
                                   : std::string("bytes"),
                        " in ", name_);
  }

  absl::Status check(int code, const Call &call) const {
    if (code == MPI_SUCCESS)
      return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("the ", describe(call), " failed: ", api_.describe(code)));
  }

  // A collective: the group's next in sequence (every rank numbers them
  // alike), recorded on the arrival board as entered, then left.
  template <typename Post>
  absl::Status collective(const Call &call, const Touched &touched,
                          Post &&post) {
    const uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (board_)
      board_->enter(seq);
    absl::Status s = postAndWait(call, touched, std::forward<Post>(post), seq);
    if (s.ok() && board_)
      board_->leave(seq);
    return s;
  }

  // Posts a call and waits for it; `seq` is the collective's number, or 0
  // for a send or recv.
  template <typename Post>
  absl::Status postAndWait(const Call &call, const Touched &touched,
                           Post &&post, uint64_t seq = 0) {
    markAccess(touched);
    MPI_Request request;
    int posted;
    {
      MpiCallOrder order;
      posted = post(&request);
    }
    if (absl::Status s = check(posted, call); !s.ok())
      return s;
    if (absl::Status s = complete(request, call, seq); !s.ok())
      return s;
    markAccess(touched);
    return absl::OkStatus();
  }

  // Polls `request` until it completes or the watchdog's deadline passes.
  absl::Status complete(MPI_Request &request, const Call &call,
                        uint64_t seq) const {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto deadline = start + timeout_;
    std::chrono::microseconds pause(50);
    for (int polls = 0;; ++polls) {
      int done = 0;
      int tested;
      {
        MpiCallOrder order;
        tested = api_.test(&request, &done, MPI_STATUS_IGNORE);
      }
      if (absl::Status s = check(tested, call); !s.ok())
        return s;
      if (done)
        return absl::OkStatus();
      if (board_)
        board_->beat();
      const auto now = Clock::now();
      if (now >= deadline)
        return absl::DeadlineExceededError(
            absl::StrCat("the ", describe(call), " did not complete within ",
                         timeout_.count() / 1000.0, " s: ", whoIsMissing(call, seq),
                         " (set the limit with --comm-timeout)"));
      // Spin briefly (MPI progresses inside MPI_Test), then back off, from
      // 50 us between polls to 400 us, so that a waiting stream leaves the
      // core to the rank's compute: a pipeline's receives are posted an
      // entry ahead and may wait for milliseconds, and polling them every
      // 50 us took several per cent of the cores of a 2-core machine.
      if (now - start < std::chrono::microseconds(100)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(2 * pause, std::chrono::microseconds(400));
      }
    }
  }

  // The watchdog's roll call of the group for collective `seq`, or of the
  // peer for a send or recv (RollCall.h); the general reason where it
  // cannot take one.
  std::string whoIsMissing(const Call &call, uint64_t seq) const {
    // Long enough for a waiting rank, descheduled on a busy node, to poll
    // again between the readings; short beside the timeout.
    const auto gap = std::clamp(timeout_ / 10, std::chrono::milliseconds(50),
                                std::chrono::milliseconds(1000));
    if (call.peer >= 0) {
      const int64_t peer = members_.at(call.peer);
      std::optional<MemberReadings> readings;
      if (board_)
        for (MemberReadings &m : board_->readOthers(gap, 2 * gap))
          if (m.rank == peer)
            readings = std::move(m);
      return peerCall(peer, call.matching, readings);
    }
    if (seq == 0 || !board_)
      return "a rank of the group died, hangs or is making a different call";
    return rollCall(seq, board_->readOthers(gap, 2 * gap));
  }

  const MpiApi &api_;
  MPI_Comm comm_;
  std::string name_;
  std::vector<int64_t> members_; // world ranks, in group order
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<ArrivalBoard> board_; // null: size 1, or no window
  std::atomic<uint64_t> seq_{0};        // collectives made so far
};

} // namespace

absl::StatusOr<std::unique_ptr<MpiWorld>> MpiWorld::init() {
  absl::StatusOr<const MpiApi *> api = loadMpi();
  if (!api.ok())
    return api.status();
  const MpiApi &mpi = **api;
  // The watchdog's arrival boards are one-sided windows. Open MPI 4's
  // osc/pt2pt refuses MPI_THREAD_MULTIPLE, with a page of advice on
  // stderr, when no other component can serve a window: without it, such a
  // run just goes without the roll call. A user's own choice stands.
  setenv("OMPI_MCA_osc", "^pt2pt", /*overwrite=*/0);
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
        *api_, comm, std::move(name), std::move(members), timeout);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Communicator>>
MpiWorld::splitCommunicator(const char *label, int64_t group, int64_t key,
                            std::vector<int64_t> members,
                            std::chrono::milliseconds timeout) const {
  MPI_Comm comm = nullptr;
  if (int code = api_->commSplit(api_->commWorld, static_cast<int>(group),
                                 static_cast<int>(key), &comm);
      code != MPI_SUCCESS)
    return absl::InternalError(absl::StrCat("creating the ", label,
                                            " communicators failed: ",
                                            api_->describe(code)));
  api_->commSetErrhandler(comm, api_->errorsReturn);
  std::string name = absl::StrCat(label, " group ", group, " (ranks ",
                                  absl::StrJoin(members, ", "), ")");
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
      *api_, comm, std::move(name), std::move(members), timeout));
}

absl::StatusOr<std::unique_ptr<Communicator>>
MpiWorld::dataGroupCommunicator(const MeshShape &shape,
                                std::chrono::milliseconds timeout) const {
  const MeshCoords c = meshCoords(shape, rank_);
  const int64_t key = c[static_cast<int>(MeshAxis::kDP)] *
                          shape.size(MeshAxis::kCP) +
                      c[static_cast<int>(MeshAxis::kCP)];
  return splitCommunicator("dp_cp", meshDataGroupIndex(shape, rank_), key,
                           meshDataGroup(shape, rank_), timeout);
}

absl::StatusOr<
    std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>>>
MpiWorld::expertCommunicators(const MeshShape &shape,
                              std::chrono::milliseconds timeout) const {
  auto ep = splitCommunicator("ep", meshExpertGroupIndex(shape, rank_),
                              meshExpertRank(shape, rank_),
                              meshExpertGroup(shape, rank_), timeout);
  if (!ep.ok())
    return ep.status();
  auto edp = splitCommunicator("edp", meshExpertDataGroupIndex(shape, rank_),
                               meshExpertDataRank(shape, rank_),
                               meshExpertDataGroup(shape, rank_), timeout);
  if (!edp.ok())
    return edp.status();
  return std::make_pair(std::move(*ep), std::move(*edp));
}

void MpiWorld::abort(int code) const {
  api_->abort(api_->commWorld, code);
  std::_Exit(code);
}

} // namespace braid::mpi
