// The group of one rank: what every mesh axis of size 1 is when no
// launcher started the run. Collectives copy or do nothing; send and recv
// have no peer and are refused.
#pragma once

#include <string>

#include "runtime/comm/Communicator.h"

namespace braid {

class SelfCommunicator final : public Communicator {
public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string &name() const override { return name_; }
  absl::Status allReduceSum(void *data, size_t count, DType dtype) override;
  absl::Status reduceScatterSum(const void *in, void *out, size_t count,
                                DType dtype) override;
  absl::Status allGather(const void *in, void *out, size_t count,
                         DType dtype) override;
  absl::Status broadcast(void *data, size_t bytes, int root) override;
  absl::Status shift(const void *in, void *out, size_t count, DType dtype,
                     int offset) override;
  absl::Status allToAllV(const void *in, const size_t *sendCounts, void *out,
                         const size_t *recvCounts, DType dtype) override;
  absl::Status send(const void *data, size_t bytes, int peer,
                    int tag) override;
  absl::Status recv(void *data, size_t bytes, int peer, int tag) override;

private:
  std::string name_;
};

} // namespace braid
