#include "runtime/train/WholeTensors.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/ShardLayout.h"
#include "runtime/train/ParameterInit.h"

namespace braid {
namespace {

// The tag of the checkpoint's transfers over the PP group, apart from the
// pipeline's channels (0 and 1) for clarity in a trace.
constexpr int kCheckpointTag = 2;
// A transfer's bytes are an int for MPI; larger tensors go in pieces.
constexpr uint64_t kPieceBytes = uint64_t{1} << 30;

uint64_t alignUp(uint64_t v) {
  return (v + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

// The sharded tensors a checkpoint stores: each parameter and its moments
// (buffers are whole).
template <typename F> void forEachStored(const LoadedPlan &plan, F f) {
  for (uint32_t param : plan.parameters) {
    const plan::ParameterInfo &info = plan.proto.tensors(param).param();
    for (uint32_t id : {param, info.exp_avg(), info.exp_avg_sq()})
      f(id);
  }
}

} // namespace

bool WholeTensors::needed(const LoadedPlan &plan) {
  bool sharded = false;
  forEachStored(plan, [&](uint32_t id) {
    sharded = sharded || plan.proto.tensors(id).has_shard();
  });
  return sharded;
}

WholeTensors::WholeTensors(const LoadedPlan &local,
                           const std::vector<LoadedPlan> &stages,
                           int64_t stage)
    : local_(local), stage_(stage),
      numStages_(std::max<int64_t>(1, static_cast<int64_t>(stages.size()))) {
  plan::Plan &header = whole_.proto;
  header.set_format_version(local.proto.format_version());
  header.set_name(local.proto.name());
  *header.mutable_model() = local.proto.model();
  *header.mutable_train() = local.proto.train();
  *header.mutable_mesh() = local.proto.mesh();
  whole_.device = local.device;
  whole_.bf16 = local.bf16;
  for (int64_t k = 0; k < numStages_; ++k) {
    const LoadedPlan &plan = k == stage_ ? local : stages[k];
    // Tensor `id` of stage k's plan, whole and renumbered in the image's
    // plan; its new id.
    auto add = [&](uint32_t id) {
      plan::Tensor &t = *header.add_tensors();
      t = plan.proto.tensors(id);
      t.set_id(static_cast<uint32_t>(header.tensors_size() - 1));
      // The image is one address space: a host tensor's place in it is its
      // image offset like any other's.
      t.clear_host();
      const bool sharded = t.has_shard();
      if (sharded) {
        t.mutable_shape()->CopyFrom(t.shard().global_shape());
        const int64_t rows = t.shard().dp_rows()
                                 ? dpRowsGroupSize(plan.proto.mesh(), t.shard())
                                 : 1;
        t.set_size_bytes(t.size_bytes() *
                         static_cast<uint64_t>(
                             rows * plan_checks::meshAxisSize(
                                        plan.proto.mesh(), t.shard().axis())));
        t.clear_shard();
      }
      tensors_.push_back({k, id, imageBytes_, t.size_bytes(), sharded});
      if (k == stage_)
        mine_.insert(t.id());
      t.set_offset(imageBytes_);
      imageBytes_ = alignUp(imageBytes_ + t.size_bytes());
      TensorDesc desc = plan.descs[id];
      desc.shape.assign(t.shape().begin(), t.shape().end());
      whole_.descs.push_back(std::move(desc));
      whole_.tensorsByName.emplace(t.name(), t.id());
      return t.id();
    };
    for (uint32_t param : plan.parameters) {
      // The parameter and its moments.
      const plan::ParameterInfo &info = plan.proto.tensors(param).param();
      const uint32_t first = add(param);
      add(info.exp_avg());
      add(info.exp_avg_sq());
      plan::ParameterInfo &moved =
          *header.mutable_tensors(first)->mutable_param();
      moved.set_exp_avg(first + 1);
      moved.set_exp_avg_sq(first + 2);
      // The image has no gradients or copies: nothing may name them.
      moved.set_grad(0);
      moved.set_compute_copy(0);
      whole_.parameters.push_back(first);
    }
    // Untrained state (expert biases): whole on every rank of its stage.
    for (uint32_t id : plan.buffers)
      whole_.buffers.push_back(add(id));
  }
}

absl::Status WholeTensors::gather(DeviceBackend &device,
                                  const AxisGroups &groups, Communicator *pp,
                                  uint8_t *image) const {
  std::vector<uint8_t> part, parts;
  for (const Entry &e : tensors_) {
    if (e.stage != stage_)
      continue;
    const plan::Tensor &t = local_.proto.tensors(e.id);
    uint8_t *out = image + e.wholeOffset;
    if (!e.sharded) {
      if (absl::Status s = device.readTensor(t, out); !s.ok())
        return s;
      continue;
    }
    const plan::MeshAxis axis = t.shard().axis();
    Communicator &group = groups(axis);
    const ShardLayout layout = ShardLayout::of(
        t, plan_checks::meshAxisSize(local_.proto.mesh(), axis), 0);
    if (group.size() != layout.parts())
      return absl::InternalError(
          absl::StrCat("checkpoint: ", t.name(), " is sharded over the ",
                       layout.parts(), " ranks of a ", planAxisName(axis),
                       " group, but ", group.name(), " has ", group.size()));
    part.resize(t.size_bytes());
    if (absl::Status s = device.readTensor(t, part.data()); !s.ok())
      return s;
    int64_t n = local_.descs[e.id].numel();
    const DType dtype = local_.descs[e.id].dtype;
    // dp_rows: the rank's rows of its TP part (or EP share), gathered over
    // DP (or EDP) first (the rows are consecutive, so the gather stacks
    // them in place).
    if (t.shard().dp_rows()) {
      Communicator &dp = groups(dpRowsAxis(t.shard()));
      std::vector<uint8_t> rows(part.size() * static_cast<size_t>(dp.size()));
      if (absl::Status s = dp.allGather(part.data(), rows.data(), n, dtype);
          !s.ok())
        return s;
      part = std::move(rows);
      n *= dp.size();
    }
    // One run per part (dimension 0, one block): the gather stacks the
    // parts where the whole tensor has them.
    const bool stacked = layout.runs() <= 1;
    if (!stacked)
      parts.resize(part.size() * static_cast<size_t>(layout.parts()));
    if (absl::Status s = group.allGather(part.data(),
                                         stacked ? out : parts.data(), n,
                                         dtype);
        !s.ok())
      return s;
    if (stacked)
      continue;
    const size_t es = dtypeSize(dtype);
    const size_t runBytes = static_cast<size_t>(layout.runLength()) * es;
    for (int64_t r = 0; r < layout.parts(); ++r) {
      const ShardLayout of = layout.forPart(r);
      const uint8_t *from =
          parts.data() + static_cast<size_t>(r) * part.size();
      for (int64_t k = 0; k < of.runs(); ++k)
        std::memcpy(out + static_cast<size_t>(of.wholeStart(k)) * es,
                    from + static_cast<size_t>(k) * runBytes, runBytes);
    }
  }
  if (pp == nullptr || numStages_ == 1)
    return absl::OkStatus();
  // Stage after stage, each tensor in the image's order: the order in which
  // rank 0 receives is the order in which each rank sends.
  for (const Entry &e : tensors_) {
    if (e.stage == 0 || (pp->rank() != 0 && e.stage != pp->rank()))
      continue;
    for (uint64_t at = 0; at < e.wholeBytes; at += kPieceBytes) {
      uint8_t *bytes = image + e.wholeOffset + at;
      const size_t n = std::min(kPieceBytes, e.wholeBytes - at);
      absl::Status s =
          pp->rank() == 0
              ? pp->recv(bytes, n, static_cast<int>(e.stage), kCheckpointTag)
              : pp->send(bytes, n, 0, kCheckpointTag);
      if (!s.ok())
        return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WholeTensors::scatter(const uint8_t *image,
                                   const MeshCoords &coords,
                                   DeviceBackend &device) const {
  std::vector<uint8_t> part;
  for (const Entry &e : tensors_) {
    if (e.stage != stage_)
      continue;
    const plan::Tensor &t = local_.proto.tensors(e.id);
    const uint8_t *whole = image + e.wholeOffset;
    if (!e.sharded) {
      if (absl::Status s = device.writeTensor(t, whole); !s.ok())
        return s;
      continue;
    }
    const ShardLayout layout = tensorLayout(local_, e.id, coords);
    const size_t es = dtypeSize(local_.descs[e.id].dtype);
    const size_t runBytes = static_cast<size_t>(layout.runLength()) * es;
    part.resize(static_cast<size_t>(layout.localNumel()) * es);
    for (int64_t k = 0; k < layout.runs(); ++k)
      std::memcpy(part.data() + static_cast<size_t>(k) * runBytes,
                  whole + static_cast<size_t>(layout.wholeStart(k)) * es,
                  runBytes);
    // dp_rows: of the TP part (or EP share), the rank's rows.
    const size_t first =
        static_cast<size_t>(dpRowsFirst(local_, e.id, coords)) * es;
    if (absl::Status s =
            device.writeTensor(t, part.data() + first);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid
