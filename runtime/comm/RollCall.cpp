#include "runtime/comm/RollCall.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braid {
namespace {

constexpr size_t kNamed = 8;

// "42nd".
std::string ordinal(uint64_t n) {
  const uint64_t tens = n % 100, units = n % 10;
  const char *suffix = "th";
  if (tens < 11 || tens > 13)
    suffix = units == 1 ? "st" : units == 2 ? "nd" : units == 3 ? "rd" : "th";
  return absl::StrCat(n, suffix);
}

// "rank 1 has", "ranks 1, 3 have", "ranks 1, ..., 8 and 5 more have".
std::string subject(const std::vector<int64_t> &ranks, const char *singular,
                    const char *plural) {
  if (ranks.size() == 1)
    return absl::StrCat("rank ", ranks[0], " ", singular);
  const size_t shown = std::min(ranks.size(), kNamed);
  std::string out = absl::StrCat(
      "ranks ", absl::StrJoin(ranks.begin(), ranks.begin() + shown, ", "));
  if (shown < ranks.size())
    absl::StrAppend(&out, " and ", ranks.size() - shown, " more");
  return absl::StrCat(out, " ", plural);
}

} // namespace

Attendance attendance(uint64_t seq, const MemberReadings &member) {
  if (!member.first || !member.second)
    return Attendance::kUnanswered;
  const ArrivalRecord &now = *member.second;
  if (now.left >= seq)
    return Attendance::kDone;
  if (now.entered < seq)
    return Attendance::kNotReached;
  return now.beats == member.first->beats ? Attendance::kStopped
                                          : Attendance::kWaiting;
}

std::string rollCall(uint64_t seq, absl::Span<const MemberReadings> members) {
  std::vector<int64_t> notReached, stopped, unanswered;
  uint64_t fewest = UINT64_MAX, most = 0;
  for (const MemberReadings &m : members) {
    switch (attendance(seq, m)) {
    case Attendance::kNotReached:
      notReached.push_back(m.rank);
      fewest = std::min(fewest, m.second->entered);
      most = std::max(most, m.second->entered);
      break;
    case Attendance::kStopped:
      stopped.push_back(m.rank);
      break;
    case Attendance::kUnanswered:
      unanswered.push_back(m.rank);
      break;
    case Attendance::kWaiting:
    case Attendance::kDone:
      break;
    }
  }
  std::vector<std::string> clauses;
  if (!notReached.empty()) {
    std::string entered =
        notReached.size() == 1 ? absl::StrCat("it has entered ", most)
        : fewest == most
            ? absl::StrCat("each has entered ", most)
            : absl::StrCat("they have entered ", fewest, " to ", most);
    clauses.push_back(absl::StrCat(
        subject(notReached, "has", "have"), " not reached it (", entered,
        " of the group's collectives, this is the ", ordinal(seq), ")"));
  }
  if (!stopped.empty())
    clauses.push_back(absl::StrCat(
        subject(stopped, "entered", "entered"),
        " it but stopped responding (stopped, or its thread is blocked)"));
  if (!unanswered.empty())
    clauses.push_back(absl::StrCat(subject(unanswered, "did", "did"),
                                   " not answer the watchdog's query"));
  if (clauses.empty())
    return "every other rank of the group is in it too: the ranks are "
           "making different calls, or MPI failed";
  return absl::StrJoin(clauses, "; ");
}

std::string peerCall(int64_t peer, const char *matching,
                     const std::optional<MemberReadings> &readings) {
  const std::string who = absl::StrCat("world rank ", peer, ", the peer,");
  if (!readings)
    return absl::StrCat(who, " has not made the matching ", matching,
                        " (it died, hangs or is making a different call)");
  if (!readings->first || !readings->second)
    return absl::StrCat(who, " did not answer the watchdog's query (it died "
                             "or is unreachable)");
  if (readings->second->beats != readings->first->beats)
    return absl::StrCat(who, " is waiting in another call: the ranks' "
                             "programs disagree on the order of their "
                             "transfers");
  return absl::StrCat(who, " has not made the matching ", matching,
                      " and is in no call (it is still computing, stopped, "
                      "or died)");
}

} // namespace braid
