// One collective or transfer instruction on a communicator (StreamTarget.h):
// the host's and a device's read the plan's kinds alike.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/MoeReplicate.h"
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

// Expert parallel's exchanges (plan.proto DISPATCH, COMBINE) on host
// memory: the elements this rank sends each group rank and receives from
// it, from the group's gathered counts [G, G x m].
struct Exchange {
  std::vector<size_t> send, recv;
};

absl::StatusOr<Exchange> exchangeOf(const CollectiveCall &call, int rank,
                                    int size, const std::string &group) {
  const TensorDesc &data = *call.tensors[0].desc;
  const TensorDesc &out = *call.outputs[0].desc;
  const auto *counts = static_cast<const int32_t *>(call.tensors[1].data);
  const int64_t n = size;
  const int64_t m = call.tensors[1].desc->numel() / (n * n);
  const int64_t width = data.shape.empty() ? 1 : data.numel() / data.shape[0];
  // Rows rank s sends rank k.
  auto rows = [&](int64_t s, int64_t k) {
    int64_t sum = 0;
    for (int64_t j = 0; j < m; ++j)
      sum += counts[s * n * m + k * m + j];
    return sum;
  };
  const bool dispatch = call.kind == plan::DISPATCH;
  // The rows each rank receives and sends in all, checked by every rank
  // alike, so that all stop together.
  std::vector<int64_t> received(n, 0), sent(n, 0);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t s = 0; s < n; ++s) {
      received[k] += rows(s, k);
      sent[k] += rows(k, s);
    }
  // What a rank sends comes from its own tokens' rows, which its buffer
  // holds unless the plan or the counts are wrong.
  const int64_t own = dispatch ? data.shape[0] : out.shape[0];
  for (int64_t k = 0; k < n; ++k)
    if (sent[k] > own)
      return absl::InternalError(absl::StrCat(
          "the counts say rank ", k, " of ", group, " routed ", sent[k],
          " token rows, more than the ", own,
          " rows of its buffer: the plan or its counts are inconsistent"));
  const int64_t room = dispatch ? out.shape[0] : data.shape[0];
  for (int64_t k = 0; k < n; ++k) {
    if (received[k] <= room)
      continue;
    int64_t hot = 0, hotCount = -1;
    for (int64_t j = 0; j < m; ++j) {
      int64_t c = 0;
      for (int64_t s = 0; s < n; ++s)
        c += counts[s * n * m + k * m + j];
      if (c > hotCount)
        hot = j, hotCount = c;
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "the dropless bound is exceeded: expert ", k * m + hot, " received ",
        hotCount, " token rows; rank ", k, " of ", group, ", which holds "
        "experts ", k * m, " to ", k * m + m - 1, ", received ", received[k],
        " in all, more than the ", room,
        " rows the plan holds for them; raise model.moe.dropless_bound, or "
        "set it to 0 for the worst case"));
  }
  // MPI counts elements in ints: a rank's whole exchange must fit.
  for (int64_t k = 0; k < n; ++k) {
    const int64_t most = std::max(received[k], sent[k]);
    if (most * width > INT32_MAX)
      return absl::ResourceExhaustedError(absl::StrCat(
          "rank ", k, " of ", group, " would exchange ", most,
          " token rows of ", width,
          " elements, more than the 2^31 - 1 elements an all-to-all takes; "
          "lower model.moe.dropless_bound or the micro-batch"));
  }
  Exchange e{std::vector<size_t>(n), std::vector<size_t>(n)};
  for (int64_t k = 0; k < n; ++k) {
    // DISPATCH sends this rank's rows of rank k and receives rank k's
    // rows of this rank; COMBINE the other way round.
    const int64_t toK = rows(rank, k), fromK = rows(k, rank);
    e.send[k] = static_cast<size_t>((dispatch ? toK : fromK) * width);
    e.recv[k] = static_cast<size_t>((dispatch ? fromK : toK) * width);
  }
  return e;
}

absl::Status runExchange(Communicator &comm, const CollectiveCall &call) {
  absl::StatusOr<Exchange> e =
      exchangeOf(call, comm.rank(), comm.size(), comm.name());
  if (!e.ok())
    return e.status();
  const TensorView &in = call.tensors[0], &out = call.outputs[0];
  if (absl::Status s = comm.allToAllV(in.data, e->send.data(), out.data,
                                      e->recv.data(), in.desc->dtype);
      !s.ok())
    return s;
  size_t received = 0;
  for (size_t c : e->recv)
    received += c;
  const size_t all = static_cast<size_t>(out.desc->numel());
  const size_t bytes = dtypeSize(out.desc->dtype);
  std::memset(static_cast<uint8_t *>(out.data) + received * bytes, 0,
              (all - received) * bytes);
  return absl::OkStatus();
}

// Hot-expert replication (plan.proto REPLICATE_EXPERTS, REDUCE_REPLICAS)
// on host memory. Expert e of the layer is held by group rank e / m as its
// local expert e mod m; a slot is unused as the kernels read it
// (moe::slotExpert: outside the layer's experts, or named by an earlier
// slot), and every rank reads the same entries.
struct Replicas {
  const int32_t *hot;
  int64_t slots, perExpert, local, experts;

  // The owner of slot h's expert and its local index; false when unused.
  bool owner(int64_t h, int *rank, int64_t *index) const {
    const int64_t e = moe::slotExpert(hot, h, experts);
    if (e < 0)
      return false;
    *rank = static_cast<int>(e / local);
    *index = e % local;
    return true;
  }
};

Replicas replicasOf(const CollectiveCall &call, int size) {
  const bool replicate = call.kind == plan::REPLICATE_EXPERTS;
  const TensorDesc &share = replicate ? *call.tensors[0].desc
                                      : *call.outputs[0].desc;
  const int64_t local = share.shape[0];
  return {static_cast<const int32_t *>(call.tensors[1].data),
          call.tensors[1].desc->numel(), local == 0 ? 0 : share.numel() / local,
          local, local * size};
}

// Slot h of the result is its expert's weight, broadcast by the owner.
absl::Status replicateExperts(Communicator &comm, const CollectiveCall &call) {
  const Replicas r = replicasOf(call, comm.size());
  const auto *share = static_cast<const float *>(call.tensors[0].data);
  auto *slots = static_cast<float *>(call.outputs[0].data);
  for (int64_t h = 0; h < r.slots; ++h) {
    float *slot = slots + h * r.perExpert;
    int owner;
    int64_t index;
    if (!r.owner(h, &owner, &index)) {
      std::fill(slot, slot + r.perExpert, 0.0f);
      continue;
    }
    if (owner == comm.rank())
      std::copy(share + index * r.perExpert,
                share + (index + 1) * r.perExpert, slot);
    if (absl::Status s = comm.broadcast(
            slot, static_cast<size_t>(r.perExpert) * sizeof(float), owner);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

// Each slot's gradients summed along the ranks in order, rank 0's first:
// rank r adds its own to what rank r - 1 passed on, and the last rank hands
// the sum to the owner. The owner's grouped weight gradient sums its
// senders' blocks in the same order (docs/kernels.md), so a replicated
// expert's gradient has the bits it has without replication. Every slot's
// chain runs before the last rank hands the sums over, so that the chains
// of successive slots follow each other along the group instead of
// waiting for the owners.
absl::Status reduceReplicas(Communicator &comm, const CollectiveCall &call) {
  constexpr int kTag = 3;
  const Replicas r = replicasOf(call, comm.size());
  const auto *grads = static_cast<const float *>(call.tensors[0].data);
  auto *share = static_cast<float *>(call.outputs[0].data);
  std::fill(share, share + r.local * r.perExpert, 0.0f);
  const int rank = comm.rank(), last = comm.size() - 1;
  const size_t bytes = static_cast<size_t>(r.perExpert) * sizeof(float);
  // The last rank keeps every slot's sum until the hand-over.
  std::vector<float> sums(
      static_cast<size_t>((rank == last ? r.slots : 1) * r.perExpert));
  for (int64_t h = 0; h < r.slots; ++h) {
    int owner;
    int64_t index;
    if (!r.owner(h, &owner, &index))
      continue;
    const float *mine = grads + h * r.perExpert;
    float *sum = sums.data() + (rank == last ? h * r.perExpert : 0);
    if (rank == 0) {
      std::copy(mine, mine + r.perExpert, sum);
    } else {
      if (absl::Status s = comm.recv(sum, bytes, rank - 1, kTag); !s.ok())
        return s;
      for (int64_t i = 0; i < r.perExpert; ++i)
        sum[i] += mine[i];
    }
    if (rank < last)
      if (absl::Status s = comm.send(sum, bytes, rank + 1, kTag); !s.ok())
        return s;
  }
  // The hand-over, slot by slot: the last rank sends nothing else, so an
  // owner's receives meet its sums in order.
  for (int64_t h = 0; h < r.slots; ++h) {
    int owner;
    int64_t index;
    if (!r.owner(h, &owner, &index))
      continue;
    float *into = share + index * r.perExpert;
    absl::Status s;
    if (rank == last && owner == last)
      std::copy(sums.begin() + h * r.perExpert,
                sums.begin() + (h + 1) * r.perExpert, into);
    else if (rank == last)
      s = comm.send(sums.data() + h * r.perExpert, bytes, owner, kTag);
    else if (rank == owner)
      s = comm.recv(into, bytes, last, kTag);
    if (!s.ok())
      return s;
  }
  return absl::OkStatus();
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
  if (call.kind == plan::DISPATCH || call.kind == plan::COMBINE)
    return runExchange(comm, call);
  if (call.kind == plan::REPLICATE_EXPERTS)
    return replicateExperts(comm, call);
  if (call.kind == plan::REDUCE_REPLICAS)
    return reduceReplicas(comm, call);
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
  if (call.kind == plan::DISPATCH || call.kind == plan::COMBINE ||
      call.kind == plan::REPLICATE_EXPERTS ||
      call.kind == plan::REDUCE_REPLICAS)
    return absl::UnimplementedError(
        "expert parallel's token exchange runs on CPU ranks only for now; "
        "leave parallel.expert_parallel out on a GPU");
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
