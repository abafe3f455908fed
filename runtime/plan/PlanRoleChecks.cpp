// Tensors the runtime itself touches: the inputs it fills, the scalars it
// reads back, and the parameters it initialises and checkpoints.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/ShardLayout.h"

namespace braid::plan_checks {
namespace {

bool sameShape(const plan::Tensor &a, const plan::Tensor &b) {
  return a.shape_size() == b.shape_size() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

// Both whole, or the same part of the same whole tensor (plan.proto Shard).
bool sameShard(const plan::Tensor &a, const plan::Tensor &b) {
  if (a.has_shard() != b.has_shard())
    return false;
  if (!a.has_shard())
    return true;
  const plan::Shard &x = a.shard();
  const plan::Shard &y = b.shard();
  return x.axis() == y.axis() && x.dim() == y.dim() &&
         shardBlocks(x) == shardBlocks(y) && x.dp_rows() == y.dp_rows() &&
         std::equal(x.global_shape().begin(), x.global_shape().end(),
                    y.global_shape().begin(), y.global_shape().end());
}

// "whole", "a shard along tp, dimension 1, in 3 blocks, of [64, 48]" or,
// with dp_rows, "the dp rows of a shard along tp, ..." ("the edp rows of"
// a shard along ep).
std::string shardString(const plan::Tensor &t) {
  if (!t.has_shard())
    return "whole";
  const plan::Shard &s = t.shard();
  std::string global = "[";
  for (int i = 0; i < s.global_shape_size(); ++i)
    absl::StrAppend(&global, i ? ", " : "", s.global_shape(i));
  return absl::StrCat(
      s.dp_rows()
          ? absl::StrCat("the ", planAxisName(dpRowsAxis(s)), " rows of ")
          : std::string(),
      "a shard along ", planAxisName(s.axis()), ", dimension ", s.dim(),
      ", in ", shardBlocks(s), shardBlocks(s) == 1 ? " block" : " blocks",
      ", of ", global, "]");
}


absl::Status checkInputs(const plan::Plan &plan, PlanScope scope,
                         LoadedPlan &loaded) {
  const int64_t rows = plan.train().micro_batch_size();
  const int64_t cols = plan.train().seq_len();
  std::optional<uint32_t> byRole[4];
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    const uint32_t id = static_cast<uint32_t>(i);
    if (t.kind() != plan::INPUT) {
      if (t.role() != plan::ROLE_UNSPECIFIED)
        return refuse(absl::StrCat(
            tensorRef(plan, id), " has role ", inputRoleName(t.role()), " but kind ",
            tensorKindName(t.kind()), ": only INPUT tensors carry a role"));
      continue;
    }
    if (t.role() < plan::TOKENS || t.role() > plan::POSITIONS)
      return refuse(absl::StrCat(tensorRef(plan, id),
                                 " is an INPUT without a role: set role to "
                                 "TOKENS, LABELS or POSITIONS"));
    std::optional<uint32_t> &slot = byRole[t.role()];
    if (slot)
      return refuse(absl::StrCat(tensorRef(plan, id), " and ",
                                 tensorRef(plan, *slot), " both have role ",
                                 inputRoleName(t.role()),
                                 ": each role belongs to exactly one INPUT"));
    slot = id;
    if (t.dtype() != plan::I32 || t.shape_size() != 2 || t.shape(0) != rows ||
        t.shape(1) != cols)
      return refuse(absl::StrCat(
          tensorRef(plan, id), " (role ", inputRoleName(t.role()), ") is ",
          planDTypeName(t.dtype()), " ", shapeString(t), ": it must be i32 [",
          rows, ", ", cols, "] (plan.train micro_batch_size, seq_len)"));
  }
  // A pipeline rank reads the inputs its stages need: the first stage the
  // tokens, the loss stage the labels, a middle one perhaps none.
  for (plan::InputRole role : {plan::TOKENS, plan::LABELS}) {
    if (!byRole[role] && scope == PlanScope::kWhole)
      return refuse(absl::StrCat("the plan has no INPUT tensor with role ",
                                 inputRoleName(role), ": one is required"));
  }
  loaded.tokens = byRole[plan::TOKENS];
  loaded.labels = byRole[plan::LABELS];
  loaded.positions = byRole[plan::POSITIONS];
  return absl::OkStatus();
}

absl::Status checkReadBackScalar(const plan::Plan &plan, uint32_t id,
                                 absl::string_view field) {
  if (id >= static_cast<uint32_t>(plan.tensors_size()))
    return refuse(absl::StrCat("plan.", field, " is ", id, " but the plan has ",
                               plan.tensors_size(), " tensors"));
  const plan::Tensor &t = plan.tensors(id);
  if (t.kind() != plan::SCALAR || t.dtype() != plan::F32 || t.shape_size() != 0)
    return refuse(absl::StrCat("plan.", field, " names ", tensorRef(plan, id),
                               ", which is ", tensorKindName(t.kind()), " ",
                               planDTypeName(t.dtype()), " ", shapeString(t),
                               ": it must be a SCALAR f32 of shape []"));
  return absl::OkStatus();
}

// One companion tensor (gradient or moment) of a parameter.
absl::Status checkCompanion(const plan::Plan &plan, uint32_t param, uint32_t id,
                            absl::string_view field, plan::TensorKind kind,
                            absl::flat_hash_map<uint32_t, uint32_t> &owner) {
  std::string where = absl::StrCat(tensorRef(plan, param), ": param.", field);
  if (id >= static_cast<uint32_t>(plan.tensors_size()))
    return refuse(absl::StrCat(where, " is ", id, " but the plan has ",
                               plan.tensors_size(), " tensors"));
  const plan::Tensor &p = plan.tensors(param);
  const plan::Tensor &t = plan.tensors(id);
  if (t.kind() != kind)
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               " of kind ", tensorKindName(t.kind()),
                               ": it must be ", tensorKindName(kind)));
  if (t.dtype() != plan::F32 || !sameShape(p, t))
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id), ", ",
                               planDTypeName(t.dtype()), " ", shapeString(t),
                               ": it must be f32 ", shapeString(p),
                               " like the parameter"));
  // Checkpoints save the moments under the parameter's name, whole: each
  // must be the same part of its whole tensor as the parameter.
  if (kind == plan::OPTIMIZER_STATE && !sameShard(p, t))
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               ", which is ", shardString(t),
                               ", but the parameter is ", shardString(p),
                               ": a moment is sharded as its parameter is"));
  auto [it, inserted] = owner.emplace(id, param);
  if (!inserted)
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               ", which already belongs to ",
                               tensorRef(plan, it->second),
                               ": each parameter needs its own gradient and "
                               "moments"));
  return absl::OkStatus();
}

// param.compute_copy of parameter `param`: 0 (none), or a WEIGHT_COPY of
// bf16 and the parameter's shape that no other parameter claims. A sharded
// parameter's copy is whole (its global shape), f32 in an FP32 plan. A host
// parameter's (optimizer offload) is f32 like it, or bf16 in a BF16 plan.
absl::Status checkComputeCopy(const plan::Plan &plan, uint32_t param,
                              absl::flat_hash_map<uint32_t, uint32_t> &owner) {
  const uint32_t id = plan.tensors(param).param().compute_copy();
  if (id == 0)
    return absl::OkStatus();
  std::string where = absl::StrCat(tensorRef(plan, param), ": param.compute_copy");
  if (id >= static_cast<uint32_t>(plan.tensors_size()))
    return refuse(absl::StrCat(where, " is ", id, " but the plan has ",
                               plan.tensors_size(), " tensors"));
  const plan::Tensor &p = plan.tensors(param);
  const plan::Tensor &t = plan.tensors(id);
  if (t.kind() != plan::WEIGHT_COPY)
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               " of kind ", tensorKindName(t.kind()),
                               ": it must be WEIGHT_COPY"));
  const bool bf16 = plan.train().precision() == plan::TrainConfig::BF16;
  // ZeRO 3 keeps the copy sharded like its master; 1 and 2 keep it whole,
  // or, over a tensor-parallel part or an expert-parallel share (dp_rows),
  // that part.
  const bool rows = p.has_shard() && p.shard().dp_rows();
  const bool part = rows && t.has_shard() && !t.shard().dp_rows();
  const bool whole = p.has_shard() && !t.has_shard();
  // A host parameter (optimizer offload) has a device copy that compute
  // reads: f32 like the parameter, or bf16 in a BF16 plan.
  const bool host = p.host();
  if (!bf16 && !whole && !part && !host)
    return refuse(absl::StrCat(
        tensorRef(plan, id),
        " is a WEIGHT_COPY but plan.train.precision is FP32: only BF16 plans "
        "and host parameters (optimizer offload) have weight copies of "
        "whole parameters"));
  if (t.host())
    return refuse(absl::StrCat(
        where, " names ", tensorRef(plan, id),
        ", a host tensor (host is set): a weight copy is what device compute "
        "reads, so it lives in the arena"));
  const plan::DType dtype =
      host && t.dtype() == plan::F32 ? plan::F32 : bf16 ? plan::BF16 : plan::F32;
  std::vector<int64_t> shape(p.shape().begin(), p.shape().end());
  if (whole)
    shape.assign(p.shard().global_shape().begin(),
                 p.shard().global_shape().end());
  else if (part && !shape.empty())
    shape[0] *= dpRowsGroupSize(plan.mesh(), p.shard());
  if (t.dtype() != dtype || (t.has_shard() && !p.has_shard()) ||
      !std::equal(t.shape().begin(), t.shape().end(), shape.begin(),
                  shape.end()))
    return refuse(absl::StrCat(
        where, " names ", tensorRef(plan, id), ", ", planDTypeName(t.dtype()),
        " ", shapeString(t), ": it must be ",
        host && bf16 ? "bf16 or f32" : planDTypeName(dtype), " ",
        whole  ? "the parameter's whole shape"
        : part ? "the parameter's tensor- or expert-parallel part"
               : shapeString(p),
        whole || part ? "" : " like the parameter"));
  plan::Tensor unrowed = p;
  if (part)
    unrowed.mutable_shard()->set_dp_rows(false);
  if (t.has_shard() && !sameShard(unrowed, t))
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               ", which is ", shardString(t),
                               ", but the parameter is ", shardString(p),
                               ": a sharded copy is the same part as its "
                               "master"));
  auto [it, inserted] = owner.emplace(id, param);
  if (!inserted)
    return refuse(absl::StrCat(where, " names ", tensorRef(plan, id),
                               ", which is already the copy of ",
                               tensorRef(plan, it->second),
                               ": each parameter needs its own weight copy"));
  return absl::OkStatus();
}

// Every WEIGHT_COPY belongs to one parameter, and only BF16 plans and
// sharded parameters have them.
absl::Status checkWeightCopies(
    const plan::Plan &plan,
    const absl::flat_hash_map<uint32_t, uint32_t> &owner, LoadedPlan &loaded) {
  loaded.bf16 = plan.train().precision() == plan::TrainConfig::BF16;
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(i);
    if (plan.tensors(i).kind() != plan::WEIGHT_COPY)
      continue;
    auto it = owner.find(id);
    if (it == owner.end())
      return refuse(absl::StrCat(
          tensorRef(plan, id),
          " is a WEIGHT_COPY that no parameter names as its "
          "param.compute_copy: nothing would ever write it"));
    loaded.weightCopies.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status checkParameters(const plan::Plan &plan, LoadedPlan &loaded) {
  absl::flat_hash_map<uint32_t, uint32_t> owner;
  absl::flat_hash_map<uint32_t, uint32_t> copyOwner;
  absl::flat_hash_set<std::string> aliases;
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    const uint32_t id = static_cast<uint32_t>(i);
    if (t.kind() != plan::PARAMETER)
      continue;
    std::string ref = tensorRef(plan, id);
    if (t.dtype() != plan::F32)
      return refuse(absl::StrCat(ref, " is a ", planDTypeName(t.dtype()),
                                 " PARAMETER: parameters are f32 master "
                                 "weights"));
    const plan::ParameterInfo &info = t.param();
    switch (info.init()) {
    case plan::NORMAL:
      if (!(std::isfinite(info.init_std()) && info.init_std() > 0))
        return refuse(absl::StrCat(ref, ": param.init is NORMAL with init_std ",
                                   info.init_std(),
                                   "; the std must be finite and positive"));
      break;
    case plan::ZEROS:
    case plan::ONES:
      break;
    default:
      return refuse(absl::StrCat(ref, ": param.init is ",
                                 static_cast<int>(info.init()),
                                 "; it must be NORMAL, ZEROS or ONES"));
    }
    if (absl::Status s = checkCompanion(plan, id, info.grad(), "grad",
                                        plan::GRADIENT, owner);
        !s.ok())
      return s;
    if (absl::Status s = checkCompanion(plan, id, info.exp_avg(), "exp_avg",
                                        plan::OPTIMIZER_STATE, owner);
        !s.ok())
      return s;
    if (absl::Status s =
            checkCompanion(plan, id, info.exp_avg_sq(), "exp_avg_sq",
                           plan::OPTIMIZER_STATE, owner);
        !s.ok())
      return s;
    if (info.checkpoint_transposed() && t.shape_size() != 2)
      return refuse(absl::StrCat(ref, " has param.checkpoint_transposed but ",
                                 t.shape_size(),
                                 " dimensions: only matrices can be stored "
                                 "transposed"));
    if (!info.tied_alias().empty()) {
      if (loaded.tensorsByName.contains(info.tied_alias()))
        return refuse(absl::StrCat(ref, ": param.tied_alias \"",
                                   absl::CEscape(info.tied_alias()),
                                   "\" is already the name of a tensor"));
      if (!aliases.insert(info.tied_alias()).second)
        return refuse(absl::StrCat(ref, ": param.tied_alias \"",
                                   absl::CEscape(info.tied_alias()),
                                   "\" is the alias of another parameter too"));
    }
    if (absl::Status s = checkComputeCopy(plan, id, copyOwner); !s.ok())
      return s;
    loaded.parameters.push_back(id);
    for (uint32_t stored : {id, info.exp_avg(), info.exp_avg_sq()})
      loaded.hostPersistent =
          loaded.hostPersistent || plan.tensors(stored).host();
  }
  if (loaded.parameters.empty())
    return refuse(
        "the plan has no PARAMETER tensors: there is nothing to train");
  // Buffers: whole f32 tensors of the device arena, checkpointed by name.
  for (uint32_t id = 0; id < static_cast<uint32_t>(plan.tensors_size()); ++id) {
    const plan::Tensor &t = plan.tensors(id);
    if (t.kind() != plan::BUFFER)
      continue;
    if (t.dtype() != plan::F32 || t.has_shard() || t.host() ||
        t.view_of() != 0 || t.has_param())
      return refuse(absl::StrCat(
          tensorRef(plan, id),
          " is a BUFFER: buffers are whole f32 tensors of the arena, without "
          "shard, host placement, view or param info"));
    loaded.buffers.push_back(id);
  }
  return checkWeightCopies(plan, copyOwner, loaded);
}

} // namespace

absl::Status checkRoles(const plan::Plan &plan, PlanScope scope,
                        LoadedPlan &loaded) {
  if (absl::Status s = checkInputs(plan, scope, loaded); !s.ok())
    return s;
  // The scalars each step's programs write and the runtime reads back; each
  // is a tensor of its own.
  const std::pair<uint32_t, absl::string_view> scalars[] = {
      {plan.loss_tensor(), "loss_tensor"},
      {plan.loss_sum_tensor(), "loss_sum_tensor"},
      {plan.grad_norm_tensor(), "grad_norm_tensor"},
      {plan.step_skipped_tensor(), "step_skipped_tensor"},
  };
  for (size_t i = 0; i < std::size(scalars); ++i) {
    if (absl::Status s =
            checkReadBackScalar(plan, scalars[i].first, scalars[i].second);
        !s.ok())
      return s;
    for (size_t j = 0; j < i; ++j)
      if (scalars[j].first == scalars[i].first)
        return refuse(absl::StrCat("plan.", scalars[j].second, " and plan.",
                                   scalars[i].second, " both name ",
                                   tensorRef(plan, scalars[i].first),
                                   ": each needs a tensor of its own"));
  }
  return checkParameters(plan, loaded);
}

} // namespace braid::plan_checks
