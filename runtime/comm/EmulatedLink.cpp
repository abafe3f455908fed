#include "runtime/comm/EmulatedLink.h"

#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace braid {

std::string LinkModel::describe() const {
  return absl::StrFormat(
      "%g us, %g GB/s",
      std::chrono::duration<double, std::micro>(latency).count(),
      bytesPerSecond / 1e9);
}

absl::StatusOr<LinkModel> parseLinkModel(const std::string &text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  double us = 0, gbps = 0;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &us) ||
      !absl::SimpleAtod(parts[1], &gbps) || !(us >= 0 && us <= 1e7) ||
      !(gbps > 0 && gbps <= 1e6))
    return absl::InvalidArgumentError(absl::StrCat(
        "the link \"", text,
        "\" is not LATENCY_US:GBPS, e.g. 25:2 for 25 us and 2 GB/s"));
  LinkModel link;
  link.latency = std::chrono::nanoseconds(static_cast<int64_t>(us * 1e3));
  link.bytesPerSecond = gbps * 1e9;
  return link;
}

template <typename Call>
absl::Status EmulatedLink::hold(double bytes, Call &&call) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = call();
  const auto until =
      start + link_.latency +
      std::chrono::nanoseconds(
          static_cast<int64_t>(bytes / link_.bytesPerSecond * 1e9));
  std::this_thread::sleep_until(until);
  return s;
}

absl::Status EmulatedLink::allReduceSum(void *data, size_t count,
                                        DType dtype) {
  const double n = size();
  return hold(2 * (n - 1) / n * count * dtypeSize(dtype),
              [&] { return inner_->allReduceSum(data, count, dtype); });
}

absl::Status EmulatedLink::reduceScatterSum(const void *in, void *out,
                                            size_t count, DType dtype) {
  const double n = size();
  return hold((n - 1) * count * dtypeSize(dtype), [&] {
    return inner_->reduceScatterSum(in, out, count, dtype);
  });
}

absl::Status EmulatedLink::allGather(const void *in, void *out, size_t count,
                                     DType dtype) {
  const double n = size();
  return hold((n - 1) * count * dtypeSize(dtype),
              [&] { return inner_->allGather(in, out, count, dtype); });
}

absl::Status EmulatedLink::broadcast(void *data, size_t bytes, int root) {
  return hold(bytes, [&] { return inner_->broadcast(data, bytes, root); });
}

// What leaves this rank for the others (its own block stays).
absl::Status EmulatedLink::allToAllV(const void *in, const size_t *sendCounts,
                                     void *out, const size_t *recvCounts,
                                     DType dtype) {
  size_t sent = 0;
  for (int r = 0; r < size(); ++r)
    if (r != rank())
      sent += sendCounts[r];
  return hold(static_cast<double>(sent * dtypeSize(dtype)), [&] {
    return inner_->allToAllV(in, sendCounts, out, recvCounts, dtype);
  });
}

absl::Status EmulatedLink::shift(const void *in, void *out, size_t count,
                                 DType dtype, int offset) {
  return hold(static_cast<double>(count * dtypeSize(dtype)), [&] {
    return inner_->shift(in, out, count, dtype, offset);
  });
}

absl::Status EmulatedLink::send(const void *data, size_t bytes, int peer,
                                int tag) {
  return hold(bytes, [&] { return inner_->send(data, bytes, peer, tag); });
}

absl::Status EmulatedLink::recv(void *data, size_t bytes, int peer, int tag) {
  return hold(bytes, [&] { return inner_->recv(data, bytes, peer, tag); });
}

} // namespace braid
