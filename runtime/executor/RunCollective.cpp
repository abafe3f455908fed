// One collective or transfer instruction on a communicator (StreamTarget.h):
// the host's and a device's read the plan's kinds alike.
#include "absl/strings/str_cat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {
namespace {

// What a communicator is given for tensors[i]: an all-reduce sums it in
// place (out == in); a reduce-scatter's count is its output's, this rank's
// shard; an all-gather's its input's.
struct TensorCall {
  void *in = nullptr;
  void *out = nullptr;
  size_t count = 0;
  DType dtype = DType::kF32;
};

absl::StatusOr<TensorCall> tensorCall(const CollectiveCall &call, size_t i) {
  const TensorView &in = call.tensors[i];
  TensorCall t{in.data, in.data, static_cast<size_t>(in.desc->numel()),
               in.desc->dtype};
  switch (call.kind) {
  case plan::ALL_REDUCE_SUM:
    return t;
  case plan::REDUCE_SCATTER_SUM:
    t.out = call.outputs[i].data;
    t.count = static_cast<size_t>(call.outputs[i].desc->numel());
    return t;
  case plan::ALL_GATHER:
  case plan::SHIFT:
    t.out = call.outputs[i].data;
    return t;
  default:
    return absl::InvalidArgumentError(
        absl::StrCat("collective kind ", call.kind, " is not known"));
  }
}

// The group rank of a transfer's peer.
int transferPeer(int rank, int size, int32_t offset) {
  return static_cast<int>(((int64_t{rank} + offset) % size + size) % size);
}

size_t transferBytes(const TransferCall &call) {
  return static_cast<size_t>(call.tensor.desc->numel()) *
         dtypeSize(call.tensor.desc->dtype);
}

// A shift on a device communicator: the send and the receive of one group,
// which NCCL runs together.
absl::Status shiftOn(DeviceCommunicator &comm, const TensorCall &t,
                     int32_t offset, void *stream) {
  const size_t bytes = t.count * dtypeSize(t.dtype);
  const int to = transferPeer(comm.rank(), comm.size(), offset);
  const int from = transferPeer(comm.rank(), comm.size(), -offset);
  if (absl::Status s = comm.send(t.in, bytes, to, stream); !s.ok())
    return s;
  return comm.recv(t.out, bytes, from, stream);
}

} // namespace

absl::Status runTransfer(Communicator &pp, const TransferCall &call) {
  const int peer = transferPeer(pp.rank(), pp.size(), call.peerOffset);
  const int tag = static_cast<int>(call.channel);
  return call.send ? pp.send(call.tensor.data, transferBytes(call), peer, tag)
                   : pp.recv(call.tensor.data, transferBytes(call), peer, tag);
}

absl::Status runTransfer(DeviceCommunicator &comm, const TransferCall &call,
                         void *stream) {
  const int peer = transferPeer(comm.rank(), comm.size(), call.peerOffset);
  return call.send
             ? comm.send(call.tensor.data, transferBytes(call), peer, stream)
             : comm.recv(call.tensor.data, transferBytes(call), peer, stream);
}

absl::Status runCollective(Communicator &comm, const CollectiveCall &call) {
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    absl::StatusOr<TensorCall> t = tensorCall(call, i);
    if (!t.ok())
      return t.status();
    absl::Status s;
    if (call.kind == plan::ALL_REDUCE_SUM)
      s = comm.allReduceSum(t->in, t->count, t->dtype);
    else if (call.kind == plan::REDUCE_SCATTER_SUM)
      s = comm.reduceScatterSum(t->in, t->out, t->count, t->dtype);
    else if (call.kind == plan::SHIFT)
      s = comm.shift(t->in, t->out, t->count, t->dtype, call.shiftOffset);
    else
      s = comm.allGather(t->in, t->out, t->count, t->dtype);
    if (!s.ok())
      return s;
  }
  return absl::OkStatus();
}

absl::Status runCollective(DeviceCommunicator &comm,
                           const CollectiveCall &call, void *stream) {
  if (absl::Status s = comm.beginGroup(); !s.ok())
    return s;
  absl::Status enqueued;
  for (size_t i = 0; i < call.tensors.size() && enqueued.ok(); ++i) {
    absl::StatusOr<TensorCall> t = tensorCall(call, i);
    if (!t.ok())
      enqueued = t.status();
    else if (call.kind == plan::ALL_REDUCE_SUM)
      enqueued = comm.allReduceSum(t->in, t->count, t->dtype, stream);
    else if (call.kind == plan::REDUCE_SCATTER_SUM)
      enqueued =
          comm.reduceScatterSum(t->in, t->out, t->count, t->dtype, stream);
    else if (call.kind == plan::SHIFT)
      enqueued = shiftOn(comm, *t, call.shiftOffset, stream);
    else
      enqueued = comm.allGather(t->in, t->out, t->count, t->dtype, stream);
  }
  // A group begun is ended, whatever went wrong inside it.
  absl::Status ended = comm.endGroup();
  return enqueued.ok() ? ended : enqueued;
}

} // namespace braid
