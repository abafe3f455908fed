// One collective instruction on a communicator (StreamTarget.h).
#include "absl/strings/str_cat.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executor/StreamTarget.h"

namespace braid {

absl::Status runCollective(Communicator &comm, const CollectiveCall &call) {
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    const TensorView &in = call.tensors[i];
    absl::Status s;
    switch (call.kind) {
    case plan::ALL_REDUCE_SUM:
      s = comm.allReduceSum(in.data, in.desc->numel(), in.desc->dtype);
      break;
    case plan::REDUCE_SCATTER_SUM: {
      const TensorView &out = call.outputs[i];
      s = comm.reduceScatterSum(in.data, out.data, out.desc->numel(),
                                in.desc->dtype);
      break;
    }
    case plan::ALL_GATHER: {
      const TensorView &out = call.outputs[i];
      s = comm.allGather(in.data, out.data, in.desc->numel(), in.desc->dtype);
      break;
    }
    default:
      s = absl::InvalidArgumentError(
          absl::StrCat("collective kind ", call.kind, " is not known"));
    }
    if (!s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid
