// A slower link for benchmarks: wraps a communicator and holds each call
// until latency + bytes / bandwidth have passed since it started, where
// bytes is what a ring algorithm sends per rank (all-reduce: 2 (n - 1) / n
// of the buffer; reduce-scatter and all-gather: (n - 1) / n; broadcast,
// shift, send and recv: the buffer). Shared-memory MPI makes communication nearly
// free on one machine, which would leave nothing for overlap to hide; with
// this link, benchmarks measure how much of a realistic transfer time the
// schedule hides (test/bench/run_dp_overlap_bench.sh).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/comm/Communicator.h"

namespace braid {

struct LinkModel {
  std::chrono::nanoseconds latency{0};
  double bytesPerSecond = 0; // > 0

  // "25 us, 2 GB/s".
  std::string describe() const;
};

// Parses "LATENCY_US:GBPS" ("25:2"); InvalidArgument naming the text.
absl::StatusOr<LinkModel> parseLinkModel(const std::string &text);

class EmulatedLink final : public Communicator {
public:
  EmulatedLink(std::unique_ptr<Communicator> inner, LinkModel link)
      : inner_(std::move(inner)), link_(link) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string &name() const override { return inner_->name(); }
  absl::Status allReduceSum(void *data, size_t count, DType dtype) override;
  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype) override;
  absl::Status allGather(const void *in, void *out, size_t count,
                         DType dtype) override;
  absl::Status broadcast(void *data, size_t bytes, int root) override;
  absl::Status allToAllV(const void *in, const size_t *sendCounts, void *out,
                         const size_t *recvCounts, DType dtype) override;
  absl::Status shift(const void *in, void *out, size_t count, DType dtype,
                     int offset) override;
  absl::Status send(const void *data, size_t bytes, int peer,
                    int tag) override;
  absl::Status recv(void *data, size_t bytes, int peer, int tag) override;

private:
  // Runs `call`, then waits out the rest of the transfer time of `bytes`.
  template <typename Call> absl::Status hold(double bytes, Call &&call);

  std::unique_ptr<Communicator> inner_;
  LinkModel link_;
};

} // namespace braid
