#include "runtime/comm/mpi/ArrivalBoard.h"

#include <algorithm>
#include <thread>

namespace braid::mpi {

std::unique_ptr<ArrivalBoard> ArrivalBoard::create(const MpiApi &api,
                                                   MPI_Comm comm,
                                                   std::vector<int64_t> members,
                                                   int self) {
  ArrivalRecord *mine = nullptr;
  MPI_Win win = nullptr;
  if (api.winAllocate(sizeof(ArrivalRecord), sizeof(uint64_t), api.infoNull,
                      comm, &mine, &win) != MPI_SUCCESS)
    return nullptr;
  api.winSetErrhandler(win, api.errorsReturn);
  // Plain stores by the owner are seen by the others' gets only in the
  // unified model (osc/sm, osc/rdma and osc/ucx offer it).
  int *model = nullptr, found = 0;
  api.winGetAttr(win, MPI_WIN_MODEL, &model, &found);
  // One passive-target epoch for the window's life, without locks: a
  // stopped rank can then hold nothing that a reader waits for.
  if (!found || model == nullptr || *model != MPI_WIN_UNIFIED ||
      api.winLockAll(MPI_MODE_NOCHECK, win) != MPI_SUCCESS) {
    api.winFree(&win);
    return nullptr;
  }
  *mine = ArrivalRecord{};
  return std::unique_ptr<ArrivalBoard>(
      new ArrivalBoard(api, win, mine, std::move(members), self));
}

ArrivalBoard::ArrivalBoard(const MpiApi &api, MPI_Win win, ArrivalRecord *mine,
                           std::vector<int64_t> members, int self)
    : api_(api), win_(win), mine_(mine), members_(std::move(members)),
      self_(self), lost_(members_.size(), false),
      first_(new ArrivalRecord[members_.size()]),
      second_(new ArrivalRecord[members_.size()]) {}

ArrivalBoard::~ArrivalBoard() {
  if (std::find(lost_.begin(), lost_.end(), true) != lost_.end()) {
    // A get may still write into the buffers: leave them and the window
    // (the process is ending, after a watchdog failure).
    first_.release();
    second_.release();
    return;
  }
  api_.winUnlockAll(win_);
  api_.winFree(&win_);
}

std::vector<bool> ArrivalBoard::readAll(ArrivalRecord *into,
                                        std::chrono::milliseconds wait) {
  const size_t n = members_.size();
  std::vector<bool> done(n, false), posted(n, false);
  std::vector<MPI_Request> requests(n);
  for (size_t r = 0; r < n; ++r)
    if (static_cast<int>(r) != self_ && !lost_[r])
      posted[r] = api_.rget(&into[r], 3, api_.uint64, static_cast<int>(r), 0, 3,
                            api_.uint64, win_, &requests[r]) == MPI_SUCCESS;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    bool pending = false;
    for (size_t r = 0; r < n; ++r) {
      if (!posted[r] || done[r])
        continue;
      int complete = 0;
      if (api_.test(&requests[r], &complete, MPI_STATUS_IGNORE) !=
          MPI_SUCCESS) {
        posted[r] = false; // failed: no answer, and nothing outstanding
        continue;
      }
      done[r] = complete != 0;
      pending = pending || !done[r];
    }
    if (!pending)
      return done;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (size_t r = 0; r < n; ++r)
        if (posted[r] && !done[r])
          lost_[r] = true;
      return done;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::vector<MemberReadings>
ArrivalBoard::readOthers(std::chrono::milliseconds gap,
                         std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<bool> first = readAll(first_.get(), wait);
  std::this_thread::sleep_for(gap);
  const std::vector<bool> second = readAll(second_.get(), wait);
  std::vector<MemberReadings> out;
  for (size_t r = 0; r < members_.size(); ++r) {
    if (static_cast<int>(r) == self_)
      continue;
    MemberReadings &m = out.emplace_back();
    m.rank = members_[r];
    if (first[r])
      m.first = first_[r];
    if (second[r])
      m.second = second_[r];
  }
  return out;
}

} // namespace braid::mpi
