// A group of ranks that exchange tensors: the ranks along one mesh axis
// (Mesh.h). Kernels and the executor reach it through the device, the way
// they reach a GPU's context. Every call is collective over the group (all
// its ranks make it, in the same order) except send and recv, and returns
// once its buffers may be reused. A call that does not complete within the
// communicator's timeout returns DeadlineExceeded naming the call, the group
// and the ranks that had not joined, where the implementation can tell.
//
// Buffers hold `count` elements of `dtype`. Sums are offered for f32 and
// i32 (gradients reduce in f32), and host all-reduces and reduce-scatters
// (MPI, self) for bf16 too (tensor- and context-parallel activations, added
// in f32 in rank order and rounded once); gathers, shifts and broadcasts
// move any dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid {

class Communicator {
public:
  virtual ~Communicator() = default;

  // This rank's index in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // For messages: the axis and this rank's group, "dp group 0 (ranks 0, 2)".
  virtual const std::string &name() const = 0;

  // data[i] = sum over ranks of data[i], in place.
  virtual absl::Status allReduceSum(void *data, size_t count,
                                    DType dtype) = 0;
  // out (count elements) = the sum over ranks of in[rank * count ...].
  virtual absl::Status reduceScatterSum(const void *in, void *out,
                                        size_t count, DType dtype) = 0;
  // out[r * count ...] = in of rank r (count elements each).
  virtual absl::Status allGather(const void *in, void *out, size_t count,
                                 DType dtype) = 0;
  // Every rank's `bytes` bytes at data become root's.
  virtual absl::Status broadcast(void *data, size_t bytes, int root) = 0;
  // One step of a ring: every rank sends `in` (count elements) to group
  // rank (rank + offset) mod size and receives into `out` what group rank
  // (rank - offset) mod size sent. Collective: every rank makes it.
  virtual absl::Status shift(const void *in, void *out, size_t count,
                             DType dtype, int offset) = 0;
  // Every rank sends sendCounts[r] elements to group rank r, in rank order
  // from `in`, and receives recvCounts[r] from rank r into `out`, in rank
  // order (size() counts each; a rank's recvCounts[r] must equal what rank
  // r sends it). Expert parallel's exchange of tokens.
  virtual absl::Status allToAllV(const void *in, const size_t *sendCounts,
                                 void *out, const size_t *recvCounts,
                                 DType dtype) = 0;
  // Point to point, matched by peer and tag.
  virtual absl::Status send(const void *data, size_t bytes, int peer,
                            int tag) = 0;
  virtual absl::Status recv(void *data, size_t bytes, int peer, int tag) = 0;
};

} // namespace braid
