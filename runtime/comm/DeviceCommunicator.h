// A group of ranks that exchange tensors in device memory: the GPU's side of
// Communicator.h, one per mesh axis (nccl/NcclCommunicator.h). The CUDA
// device reaches it through the run's Ranks, the way its kernels reach their
// GPU context, and enqueues the plan's collectives on the instruction's
// stream.
//
// Every call is enqueued on `stream` (a cudaStream_t, opaque here so that
// this header is free of CUDA) and returns at once; its work runs in stream
// order and its buffers may be reused by work queued after it on that
// stream. All ranks of the group enqueue the same calls in the same order,
// except send and recv, which are matched by peer and order. A call that
// cannot be enqueued returns the error; one that fails or hangs once
// enqueued is caught by poll(), the watchdog, which the device calls while
// it waits for its streams.
//
// Buffers hold `count` elements of `dtype`; sums are f32 or i32 (as
// Communicator's), gathers and broadcasts move any dtype.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid {

class DeviceCommunicator {
public:
  virtual ~DeviceCommunicator() = default;

  // This rank's index in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group as Communicator names it: "dp group 0 (ranks 0, 2)".
  virtual const std::string &name() const = 0;

  // What the calls enqueued from now on belong to, for the watchdog's
  // errors: "step 12, program \"step\"".
  virtual void setOrigin(std::string origin) = 0;

  // data[i] = sum over ranks of data[i], in place.
  virtual absl::Status allReduceSum(void *data, size_t count, DType dtype,
                                    void *stream) = 0;
  // out (count elements) = the sum over ranks of in[rank * count ...].
  virtual absl::Status reduceScatterSum(const void *in, void *out,
                                        size_t count, DType dtype,
                                        void *stream) = 0;
  // out[r * count ...] = in of rank r (count elements each).
  virtual absl::Status allGather(const void *in, void *out, size_t count,
                                 DType dtype, void *stream) = 0;
  // Every rank's `bytes` bytes at data become root's.
  virtual absl::Status broadcast(void *data, size_t bytes, int root,
                                 void *stream) = 0;
  // Point to point, matched by peer and order (there are no tags).
  virtual absl::Status send(const void *data, size_t bytes, int peer,
                            void *stream) = 0;
  virtual absl::Status recv(void *data, size_t bytes, int peer,
                            void *stream) = 0;

  // The calls made between beginGroup() and endGroup() are launched together
  // at endGroup() (NCCL fuses a bucket of gradients into one launch), and
  // the watchdog follows them as one call. Groups do not nest, and the calls
  // of a group share one stream.
  virtual absl::Status beginGroup() = 0;
  virtual absl::Status endGroup() = 0;

  // The watchdog: OK while every call enqueued so far has completed, or has
  // been running for less than the timeout since poll() first saw it start
  // on its stream (work queued before it does not count). Otherwise the
  // communicator is aborted, so that its stream moves on, and the error
  // names the call, the group and its origin: DeadlineExceeded for a
  // timeout, Internal for an error the library reported. Once aborted,
  // every call returns that error again.
  virtual absl::Status poll() = 0;
};

} // namespace braid
