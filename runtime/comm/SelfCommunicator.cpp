#include "runtime/comm/SelfCommunicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

absl::Status noPeer(const std::string &name, int peer) {
  return absl::FailedPreconditionError(absl::StrCat(
      name, " has one rank, so it has no peer ", peer, " to exchange with"));
}

} // namespace

absl::Status SelfCommunicator::allReduceSum(void *, size_t, DType) {
  return absl::OkStatus();
}

absl::Status SelfCommunicator::reduceScatterSum(const void *in, void *out,
                                                size_t count, DType dtype) {
  if (in != out && count > 0)
    std::memmove(out, in, count * dtypeSize(dtype));
  return absl::OkStatus();
}

absl::Status SelfCommunicator::allGather(const void *in, void *out,
                                         size_t count, DType dtype) {
  if (in != out && count > 0)
    std::memmove(out, in, count * dtypeSize(dtype));
  return absl::OkStatus();
}

// Around a ring of one rank, what is sent comes back.
absl::Status SelfCommunicator::shift(const void *in, void *out, size_t count,
                                     DType dtype, int) {
  if (in != out && count > 0)
    std::memmove(out, in, count * dtypeSize(dtype));
  return absl::OkStatus();
}

// A rank's own block comes back to it.
absl::Status SelfCommunicator::allToAllV(const void *in,
                                         const size_t *sendCounts, void *out,
                                         const size_t *recvCounts,
                                         DType dtype) {
  if (sendCounts[0] != recvCounts[0])
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": an all-to-all of one rank sends ", sendCounts[0],
        " elements to itself but expects ", recvCounts[0]));
  if (in != out && sendCounts[0] > 0)
    std::memmove(out, in, sendCounts[0] * dtypeSize(dtype));
  return absl::OkStatus();
}

absl::Status SelfCommunicator::broadcast(void *, size_t, int root) {
  if (root != 0)
    return noPeer(name_, root);
  return absl::OkStatus();
}

absl::Status SelfCommunicator::send(const void *, size_t, int peer, int) {
  return noPeer(name_, peer);
}

absl::Status SelfCommunicator::recv(void *, size_t, int peer, int) {
  return noPeer(name_, peer);
}

} // namespace braid
