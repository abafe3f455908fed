// The watchdog's roll call: when a collective does not complete in time,
// which ranks of its group keep it from completing. Pure logic, shared by
// the MPI communicator (mpi/ArrivalBoard.h keeps and reads the records) and
// the tests.
//
// Every rank keeps, per communicator, a record of where it is in the
// group's sequence of collectives: the number of the last one it entered,
// of the last one it left, and a heartbeat that its wait loop advances.
// All ranks make a group's collectives in the same order, so they number
// them alike. When collective k stalls on one rank, two readings of each
// other member's record, a moment apart, tell apart a rank that
//   - has not reached k (entered < k): still computing, waiting elsewhere,
//     or it died before getting there;
//   - entered k but whose heartbeat stood still: stopped (SIGSTOP, a
//     debugger, a swapped-out node) or its communicating thread blocked;
//   - could not be read in time: unreachable, or an MPI whose one-sided
//     reads need the stopped owner's help;
// from one that left k (a broadcast's root) or is waiting in it, polling:
// not the cause.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"

namespace braid {

// One rank's place in one group's collectives. Three words that MPI reads
// as one block of uint64 (the layout is part of the window's contract).
struct ArrivalRecord {
  uint64_t entered = 0; // the last collective it entered (1, 2, ...)
  uint64_t left = 0;    // the last it completed
  uint64_t beats = 0;   // advanced by every poll while it waits
};
static_assert(sizeof(ArrivalRecord) == 3 * sizeof(uint64_t));

// Two readings of a member's record; nullopt where the read did not
// complete in time.
struct MemberReadings {
  int64_t rank = 0; // its world rank, for the message
  std::optional<ArrivalRecord> first, second;
};

enum class Attendance {
  kWaiting,    // in the collective and polling
  kDone,       // it completed the collective
  kNotReached, // it has not entered the collective
  kStopped,    // it entered, but its heartbeat stood still
  kUnanswered, // its record could not be read
};

// What `member`'s readings say about collective `seq`.
Attendance attendance(uint64_t seq, const MemberReadings &member);

// The ranks that keep collective `seq` from completing, as the watchdog
// says it after "did not complete within T s: ", e.g. "rank 1 has not
// reached it (it has entered 41 of the group's collectives, this is the
// 42nd)". When every member reached it and is waiting: "every other rank
// of the group is in it too: ...". At most 8 ranks are named per kind, then
// "and N more". `members` holds every rank of the group but the caller.
std::string rollCall(uint64_t seq, absl::Span<const MemberReadings> members);

// For a send or recv that does not complete in time: what the peer's
// readings say, e.g. "world rank 3, the peer, has not made the matching recv and
// is in no call (it is still computing, stopped, or died)". `matching`
// names the peer's call ("recv" for a stalled send). Without readings
// (nullopt) the peer is named with the general reason.
std::string peerCall(int64_t peer, const char *matching,
                     const std::optional<MemberReadings> &readings);

} // namespace braid
