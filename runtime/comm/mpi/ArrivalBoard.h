// The arrival records (RollCall.h) of one communicator's ranks, each in
// its owner's part of an MPI window, so that a rank whose collective stalls
// can read the others' records. Over shared memory (osc/sm) and RDMA a read
// needs nothing from the rank read, which is what makes it work against a
// stopped rank; where it does need the owner (osc/pt2pt over TCP), the
// bounded wait turns a stopped owner into "did not answer".
//
// Cost per collective: two 8-byte stores into this rank's own record, and
// one per poll while it waits; no message, no MPI call. Reading is for the
// failure path only: one get per other member, twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/comm/RollCall.h"
#include "runtime/comm/mpi/MpiApi.h"

namespace braid::mpi {

class ArrivalBoard {
public:
  // Collective over `comm` (every member calls it, as for any window).
  // `members` are the group's world ranks in group order, `self` this
  // rank's index among them. Null when MPI offers no window with the
  // unified memory model; the watchdog then names no ranks.
  static std::unique_ptr<ArrivalBoard> create(const MpiApi &api, MPI_Comm comm,
                                              std::vector<int64_t> members,
                                              int self);
  // Collective too (MPI_Win_free): ranks free their communicators, and so
  // their boards, in the same order.
  ~ArrivalBoard();
  ArrivalBoard(const ArrivalBoard &) = delete;
  ArrivalBoard &operator=(const ArrivalBoard &) = delete;

  // This rank's record. Collectives of one group are made one at a time,
  // so `seq` only grows; any thread may beat.
  void enter(uint64_t seq) {
    __atomic_store_n(&mine_->entered, seq, __ATOMIC_RELEASE);
  }
  void leave(uint64_t seq) {
    __atomic_store_n(&mine_->left, seq, __ATOMIC_RELEASE);
  }
  void beat() { __atomic_fetch_add(&mine_->beats, 1, __ATOMIC_RELAXED); }

  // Every other member's record, read twice `gap` apart, each reading
  // waiting at most `wait` for MPI to deliver it. A read that has not
  // completed by then is left as nullopt, and so is every later read of
  // that member (MPI cannot cancel the read, so its buffer is not reused).
  std::vector<MemberReadings> readOthers(std::chrono::milliseconds gap,
                                         std::chrono::milliseconds wait);

private:
  ArrivalBoard(const MpiApi &api, MPI_Win win, ArrivalRecord *mine,
               std::vector<int64_t> members, int self);
  // One reading of every other member into `into` (one slot each).
  std::vector<bool> readAll(ArrivalRecord *into,
                            std::chrono::milliseconds wait);

  const MpiApi &api_;
  MPI_Win win_;
  ArrivalRecord *mine_; // this rank's part of the window
  std::vector<int64_t> members_;
  int self_;
  std::mutex mutex_; // one reader at a time
  // Per member: a read of it is still outstanding, so it is not read again.
  std::vector<bool> lost_;
  std::unique_ptr<ArrivalRecord[]> first_, second_;
};

} // namespace braid::mpi
