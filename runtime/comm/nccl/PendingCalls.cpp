#include "runtime/comm/nccl/PendingCalls.h"

#include "absl/strings/str_cat.h"

namespace braid::nccl {

absl::StatusOr<const PendingCalls::Call *>
PendingCalls::update(absl::FunctionRef<absl::StatusOr<bool>(void *)> passed,
                     Clock::time_point now,
                     absl::FunctionRef<void(void *)> release) {
  const Call *late = nullptr;
  for (auto it = calls_.begin(); it != calls_.end();) {
    absl::StatusOr<bool> done = passed(it->done);
    if (!done.ok())
      return done.status();
    if (*done) {
      release(it->start);
      release(it->done);
      it = calls_.erase(it);
      continue;
    }
    if (!it->startedAt) {
      absl::StatusOr<bool> started = passed(it->start);
      if (!started.ok())
        return started.status();
      if (*started)
        it->startedAt = now;
    }
    if (late == nullptr && it->startedAt && now - *it->startedAt > timeout_)
      late = &*it;
    ++it;
  }
  return late;
}

void PendingCalls::clear(absl::FunctionRef<void(void *)> release) {
  for (Call &call : calls_) {
    release(call.start);
    release(call.done);
  }
  calls_.clear();
}

absl::Status PendingCalls::timeoutError(const Call &call,
                                        const std::string &group) const {
  return absl::DeadlineExceededError(absl::StrCat(
      describeCall(call, group), " did not complete within ",
      timeout_.count() / 1000.0,
      " s of starting on its stream: a rank of the group died, hangs or is "
      "making a different call (set the limit with --comm-timeout); the "
      "NCCL communicator was aborted"));
}

std::string describeCall(const PendingCalls::Call &call,
                         const std::string &group) {
  return absl::StrCat(call.origin, call.origin.empty() ? "" : ": ", "the ",
                      call.what, " in ", group);
}

} // namespace braid::nccl
