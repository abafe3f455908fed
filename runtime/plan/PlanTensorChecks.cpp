// The tensor table: ids, names, dtypes, shapes, byte sizes and offsets.
#include <algorithm>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/ShardLayout.h"

namespace braid::plan_checks {
namespace {

constexpr uint64_t kAlignment = kPlanAlignment;

bool knownDType(plan::DType d) {
  return d == plan::F32 || d == plan::BF16 || d == plan::I32;
}

bool knownKind(plan::TensorKind k) {
  return k >= plan::PARAMETER && k <= plan::BUFFER;
}

DType kernelDType(plan::DType d) {
  switch (d) {
  case plan::BF16:
    return DType::kBF16;
  case plan::I32:
    return DType::kI32;
  default:
    return DType::kF32;
  }
}

int64_t planDTypeSize(plan::DType d) { return d == plan::BF16 ? 2 : 4; }

// A shard is one part of the whole tensor (plan.proto Shard): along TP on
// any dimension, in any number of blocks, each divided among the group;
// along DP (ZeRO) and EP (an MoE layer's experts) on dimension 0 in one
// block.
absl::Status checkShard(const plan::Plan &plan, const plan::Tensor &t,
                        const std::string &ref) {
  const plan::Shard &shard = t.shard();
  if (shard.axis() < plan::TP || shard.axis() > plan::EDP)
    return refuse(absl::StrCat(ref, ": shard.axis is ", shard.axis(),
                               "; expected TP, CP, PP, DP, DP_CP, EP or EDP"));
  const std::string axis = planAxisName(shard.axis());
  const int64_t blocks = shardBlocks(shard);
  if (shard.axis() != plan::TP && shard.axis() != plan::DP &&
      shard.axis() != plan::EP)
    return refuse(absl::StrCat(
        ref, ": a shard along the ", axis,
        " axis; this runtime shards along tp (any dimension), dp and ep "
        "(dimension 0) only"));
  if (shard.axis() != plan::TP && (shard.dim() != 0 || blocks != 1))
    return refuse(absl::StrCat(
        ref, ": a shard along dimension ", shard.dim(), " in ", blocks,
        " blocks of the ", axis, " axis; this runtime shards along ", axis,
        " on dimension 0 in one block only (",
        shard.axis() == plan::DP ? "ZeRO" : "an MoE layer's experts", ")"));
  const bool rows = shard.dp_rows();
  if (rows && shard.axis() != plan::TP && shard.axis() != plan::EP)
    return refuse(absl::StrCat(
        ref, ": a shard along ", axis,
        " with dp_rows; dp_rows takes ZeRO's rows of a tensor-parallel part "
        "or of an expert-parallel share, so its axis is tp or ep"));
  // The group that cuts dimension 0 again: DP, or EDP for an EP share.
  const int64_t dp = rows ? dpRowsGroupSize(plan.mesh(), shard) : 1;
  const std::string rowsAxis = planAxisName(dpRowsAxis(shard));
  const int64_t parts = meshAxisSize(plan.mesh(), shard.axis());
  std::string global = "[";
  for (int i = 0; i < shard.global_shape_size(); ++i)
    absl::StrAppend(&global, i ? ", " : "", shard.global_shape(i));
  global += "]";
  if (shard.dim() >= static_cast<uint32_t>(t.shape_size()))
    return refuse(absl::StrCat(ref, " has shape ", shapeString(t),
                               " but is a shard along dimension ", shard.dim(),
                               ", which it does not have"));
  // blocks * parts pieces of the sharded dimension, in 64 bits.
  if (blocks > std::numeric_limits<int64_t>::max() / parts)
    return refuse(absl::StrCat(ref, ": shard.blocks is ", blocks,
                               "; blocks times the group size must fit in 64 "
                               "bits"));
  const int64_t pieces = blocks * parts;
  bool fits = shard.global_shape_size() == t.shape_size();
  for (int d = 0; fits && d < t.shape_size(); ++d) {
    const int64_t g = shard.global_shape(d);
    int64_t mine = g;
    if (d == static_cast<int>(shard.dim()))
      mine = g >= 0 && g % pieces == 0 ? g / parts : -1;
    // With dp_rows, this rank's rows of the TP part or EP share.
    if (d == 0 && mine >= 0)
      mine = mine % dp == 0 ? mine / dp : -1;
    fits = mine >= 0 && mine == t.shape(d);
  }
  if (!fits)
    return refuse(absl::StrCat(
        ref, " has shape ", shapeString(t), " but is a shard of ", global,
        " along dimension ", shard.dim(),
        blocks > 1 ? absl::StrCat(" in ", blocks, " blocks") : std::string(),
        " over the ", parts, " ranks of a ", axis,
        " group: the shard must be that dimension divided by ", parts,
        blocks > 1 ? absl::StrCat(" (and divisible by ", pieces,
                                  ", blocks times ranks)")
                   : std::string(),
        " and every other dimension whole",
        rows ? absl::StrCat(", but dimension 0 further divided by the ", dp,
                            " ranks of the ", rowsAxis, " axis (dp_rows)")
             : std::string()));
  return absl::OkStatus();
}

// A view (plan.proto Tensor.view_of) names a range of its base's bytes:
// both ACTIVATION tensors of one dtype, the base no view itself, the view's
// bytes inside the base's. Offsets and sizes are already checked.
absl::Status checkView(const plan::Plan &plan, uint32_t id) {
  const plan::Tensor &t = plan.tensors(id);
  const std::string ref = tensorRef(plan, id);
  const uint32_t n = static_cast<uint32_t>(plan.tensors_size());
  if (t.view_of() - 1 >= n)
    return refuse(absl::StrCat(
        ref, " has view_of ", t.view_of(), ", a view of tensor ",
        t.view_of() - 1, ", which is not below the plan's ", n, " tensors"));
  const uint32_t baseId = t.view_of() - 1;
  const plan::Tensor &base = plan.tensors(baseId);
  const std::string baseRef = tensorRef(plan, baseId);
  if (baseId == id)
    return refuse(absl::StrCat(ref, " has view_of ", t.view_of(),
                               ", a view of itself: view_of is 1 + the id of "
                               "another tensor, or 0"));
  if (t.kind() != plan::ACTIVATION)
    return refuse(absl::StrCat(ref, " is a view of ", baseRef, " but is a ",
                               tensorKindName(t.kind()),
                               " tensor: only ACTIVATION tensors are views"));
  if (base.kind() != plan::ACTIVATION)
    return refuse(absl::StrCat(ref, " is a view of ", baseRef, ", a ",
                               tensorKindName(base.kind()),
                               " tensor: a view's base is an ACTIVATION "
                               "tensor"));
  if (base.host())
    return refuse(absl::StrCat(ref, " is a view of ", baseRef,
                               ", a host tensor (host is set): host tensors "
                               "have no views, since only copy launches use "
                               "them"));
  if (base.view_of() != 0)
    return refuse(absl::StrCat(ref, " is a view of ", baseRef,
                               ", which is itself a view (of ",
                               tensorRef(plan, base.view_of() - 1),
                               "): a view's base owns its bytes; name that "
                               "base instead"));
  if (t.dtype() != base.dtype())
    return refuse(absl::StrCat(ref, " is ", planDTypeName(t.dtype()),
                               " but is a view of ", baseRef, ", which is ",
                               planDTypeName(base.dtype()),
                               ": a view has its base's dtype"));
  const uint64_t end = t.offset() + t.size_bytes();
  const uint64_t baseEnd = base.offset() + base.size_bytes();
  if (t.offset() < base.offset() || end > baseEnd)
    return refuse(absl::StrCat(ref, " is a view of ", baseRef,
                               " but its bytes [", t.offset(), ", ", end,
                               ") are not inside the base's [", base.offset(),
                               ", ", baseEnd, ")"));
  return absl::OkStatus();
}

// A host tensor (plan.proto Tensor.host) lives in the host arena: an
// offloaded ACTIVATION (which `copy` launches move to and from the device),
// or a PARAMETER or OPTIMIZER_STATE of optimizer offload (which launches on
// host streams update, possibly a tensor-parallel shard); it owns its bytes
// whole, never a view, at an aligned offset within plan.memory.host_bytes. The offset is
// already checked for alignment.
absl::Status checkHostTensor(const plan::Plan &plan, uint32_t id) {
  const plan::Tensor &t = plan.tensors(id);
  const std::string ref = tensorRef(plan, id);
  const uint64_t host = plan.memory().host_bytes();
  if (t.kind() != plan::ACTIVATION && t.kind() != plan::PARAMETER &&
      t.kind() != plan::OPTIMIZER_STATE)
    return refuse(absl::StrCat(
        ref, " is a ", tensorKindName(t.kind()),
        " tensor on the host (host is set): only ACTIVATION (activation "
        "offload), PARAMETER and OPTIMIZER_STATE (optimizer offload) tensors "
        "live in the host arena; ", tensorKindName(t.kind()),
        " tensors stay on the device"));
  if (t.view_of() != 0)
    return refuse(absl::StrCat(
        ref, " is on the host (host is set) but is a view of ",
        tensorRef(plan, t.view_of() - 1),
        ": a host tensor owns its bytes; views are of device tensors only"));
  if (t.has_shard() && t.kind() == plan::ACTIVATION)
    return refuse(absl::StrCat(
        ref, " is on the host (host is set) but has a shard: host "
             "activations are never shards"));
  if (t.size_bytes() > host || t.offset() > host - t.size_bytes())
    return refuse(absl::StrCat(ref, ": offset ", t.offset(), " + size_bytes ",
                               t.size_bytes(),
                               " does not fit in the host arena of ", host,
                               " bytes (plan.memory.host_bytes)"));
  return absl::OkStatus();
}

} // namespace

uint32_t viewBase(const plan::Plan &plan, uint32_t id) {
  const uint32_t of = plan.tensors(id).view_of();
  return of == 0 ? id : of - 1;
}

int64_t meshAxisSize(const plan::Mesh &mesh, plan::MeshAxis axis) {
  int64_t size = 1;
  switch (axis) {
  case plan::TP:
    size = mesh.tp();
    break;
  case plan::CP:
    size = mesh.cp();
    break;
  case plan::PP:
    size = mesh.pp();
    break;
  case plan::DP:
    size = mesh.dp();
    break;
  case plan::DP_CP:
    size = mesh.dp() * mesh.cp();
    break;
  case plan::EP:
    size = mesh.ep();
    break;
  case plan::EDP:
    size = mesh.dp() / std::max<int64_t>(mesh.ep(), 1) *
           std::max<int64_t>(mesh.cp(), 1);
    break;
  default:
    break;
  }
  return std::max<int64_t>(size, 1);
}

absl::Status refuse(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

std::string shapeString(const plan::Tensor &t) {
  std::string s = "[";
  for (int i = 0; i < t.shape_size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", t.shape(i));
  return s + "]";
}

std::string tensorRef(const plan::Plan &plan, uint32_t id) {
  if (id >= static_cast<uint32_t>(plan.tensors_size()))
    return absl::StrCat("plan.tensors[", id, "]");
  return absl::StrCat("plan.tensors[", id, "] (",
                      absl::CEscape(plan.tensors(id).name()), ")");
}

absl::Status checkTensors(const plan::Plan &plan, LoadedPlan &loaded) {
  const uint64_t arena = plan.memory().arena_bytes();
  if (arena > kMaxArenaBytes)
    return refuse(absl::StrCat(
        "plan.memory.arena_bytes is ", arena, " (", arena >> 40,
        " TiB), more than the ", kMaxArenaBytes >> 40,
        " TiB a process can address: no machine can run this plan"));
  const uint64_t host = plan.memory().host_bytes();
  if (host > kMaxArenaBytes)
    return refuse(absl::StrCat(
        "plan.memory.host_bytes is ", host, " (", host >> 40,
        " TiB), more than the ", kMaxArenaBytes >> 40,
        " TiB a process can address: no machine can run this plan"));
  loaded.descs.reserve(plan.tensors_size());
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    const uint32_t id = static_cast<uint32_t>(i);
    std::string ref = tensorRef(plan, id);
    if (t.id() != id)
      return refuse(absl::StrCat(ref, " has id ", t.id(),
                                 ": a tensor's id must equal its index in "
                                 "plan.tensors"));
    if (t.name().empty())
      return refuse(absl::StrCat(ref, " has no name: every tensor needs one"));
    auto [it, inserted] = loaded.tensorsByName.emplace(t.name(), id);
    if (!inserted)
      return refuse(absl::StrCat(ref, " has the same name as ",
                                 tensorRef(plan, it->second),
                                 ": tensor names must be unique"));
    if (!knownDType(t.dtype()))
      return refuse(absl::StrCat(ref, " has dtype ",
                                 static_cast<int>(t.dtype()),
                                 ": it must be F32, BF16 or I32"));
    if (!knownKind(t.kind()))
      return refuse(absl::StrCat(ref, " has kind ", static_cast<int>(t.kind()),
                                 ": it must be one of PARAMETER, GRADIENT, "
                                 "OPTIMIZER_STATE, INPUT, ACTIVATION, SCALAR, "
                                 "WEIGHT_COPY, BUFFER"));

    // numel * dtype size, refusing anything that would overflow 63 bits.
    const int64_t elemSize = planDTypeSize(t.dtype());
    const int64_t maxElems = std::numeric_limits<int64_t>::max() / elemSize;
    int64_t numel = 1;
    for (int d = 0; d < t.shape_size(); ++d) {
      int64_t dim = t.shape(d);
      if (dim < 0)
        return refuse(absl::StrCat(ref, " has shape ", shapeString(t),
                                   ": dimension ", d, " is negative"));
      if (dim != 0 && numel > maxElems / dim)
        return refuse(absl::StrCat(ref, " has shape ", shapeString(t),
                                   ": its byte size does not fit in 64 bits"));
      numel *= dim;
    }
    const uint64_t expected = static_cast<uint64_t>(numel * elemSize);
    if (t.size_bytes() != expected)
      return refuse(absl::StrCat(ref, " has size_bytes ", t.size_bytes(),
                                 " but shape ", shapeString(t), " of ",
                                 planDTypeName(t.dtype()), " needs ", expected,
                                 " bytes"));
    if (t.offset() % kAlignment != 0)
      return refuse(absl::StrCat(ref, ": offset ", t.offset(), " is not ",
                                 kAlignment, "-byte aligned"));
    if (t.host()) {
      if (absl::Status s = checkHostTensor(plan, id); !s.ok())
        return s;
    } else if (t.size_bytes() > arena || t.offset() > arena - t.size_bytes())
      return refuse(absl::StrCat(ref, ": offset ", t.offset(), " + size_bytes ",
                                 t.size_bytes(),
                                 " does not fit in the arena of ", arena,
                                 " bytes (plan.memory.arena_bytes)"));
    if (t.has_shard())
      if (absl::Status s = checkShard(plan, t, ref); !s.ok())
        return s;
    TensorDesc desc;
    desc.shape.assign(t.shape().begin(), t.shape().end());
    desc.dtype = kernelDType(t.dtype());
    loaded.descs.push_back(std::move(desc));
  }
  for (int i = 0; i < plan.tensors_size(); ++i)
    if (plan.tensors(i).view_of() != 0)
      if (absl::Status s = checkView(plan, static_cast<uint32_t>(i)); !s.ok())
        return s;
  return absl::OkStatus();
}

} // namespace braid::plan_checks
