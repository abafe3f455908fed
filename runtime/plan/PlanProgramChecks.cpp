// Programs: every instruction's stream, operands, kernel and event, checked
// and resolved into LoadedInstructions.
#include <algorithm>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/RepeatWalk.h"
#include "runtime/plan/ShardLayout.h"

namespace braid::plan_checks {
namespace {

// More readback slots than this is not a plan braidc writes (it uses one
// per micro-batch and two more), and would size host memory by a number
// read from a file.
constexpr uint32_t kMaxReadbacks = (1u << 16) + 2;

const char *kindName(plan::ProgramKind kind) {
  return kind == plan::STEP ? "STEP" : "INIT";
}

const char *deviceName(Device device) {
  return device == Device::kCPU ? "CPU" : "CUDA";
}

absl::Status
resolveOperands(const plan::Plan &plan,
                const google::protobuf::RepeatedField<uint32_t> &ids,
                absl::string_view what, const std::string &where,
                std::vector<uint32_t> &out) {
  for (int k = 0; k < ids.size(); ++k) {
    if (ids[k] >= static_cast<uint32_t>(plan.tensors_size()))
      return refuse(absl::StrCat(where, ": ", what, "[", k, "] is tensor ",
                                 ids[k], " but the plan has ",
                                 plan.tensors_size(), " tensors"));
    out.push_back(ids[k]);
  }
  return absl::OkStatus();
}

// Host tensors (plan.proto Tensor.host) live in the host arena, pinned host
// memory on a GPU, which kernels, collectives and transfers cannot reach
// at device speed or at all: only the `copy` kernel moves them to and from
// the device (activation offload). `what` says how the instruction uses
// tensor `id` ("reads", "stages", ...).
absl::Status refuseHostUse(const plan::Plan &plan, const std::string &where,
                           absl::string_view what, uint32_t id) {
  return refuse(absl::StrCat(
      where, ": ", what, " ", tensorRef(plan, id),
      ", a host tensor (host is set): only launches on host streams "
      "(plan.host_streams) and launches of kernel \"copy\" read or write "
      "host tensors"));
}

// Whether `id` names a host tensor; an id beyond the tensor table is left
// to the checks that name it.
bool isHost(const plan::Plan &plan, uint32_t id) {
  return id < static_cast<uint32_t>(plan.tensors_size()) &&
         plan.tensors(id).host();
}

// The first host tensor among `ids`, if any.
template <typename Ids>
std::optional<uint32_t> firstHost(const plan::Plan &plan, const Ids &ids) {
  for (uint32_t id : ids)
    if (isHost(plan, id))
      return id;
  return std::nullopt;
}

// An instruction other than a copy launch names no host tensor among its
// operands (resolved, so valid ids).
absl::Status checkNoHostOperands(const plan::Plan &plan,
                                 const LoadedInstruction &inst,
                                 const std::string &where) {
  if (std::optional<uint32_t> id = firstHost(plan, inst.inputs))
    return refuseHostUse(plan, where, "reads", *id);
  if (std::optional<uint32_t> id = firstHost(plan, inst.outputs))
    return refuseHostUse(plan, where, "writes", *id);
  return absl::OkStatus();
}

// A launch on a host stream reads and writes host tensors only.
absl::Status checkHostStreamOperands(const plan::Plan &plan,
                                     const LoadedInstruction &inst,
                                     const std::string &where) {
  for (const auto *ids : {&inst.inputs, &inst.outputs})
    for (uint32_t id : *ids)
      if (!isHost(plan, id))
        return refuse(absl::StrCat(
            where, ": ", ids == &inst.inputs ? "reads" : "writes", " ",
            tensorRef(plan, id), ", a device tensor, on host stream ",
            inst.stream,
            ": launches on a host stream (plan.host_streams) run on the host "
            "CPU and read and write host tensors only"));
  return absl::OkStatus();
}

absl::Status resolveLaunch(const plan::Plan &plan, const plan::Launch &launch,
                           const KernelRegistry &registry, Device device,
                           const LoadedPlan &loaded, const std::string &where,
                           LoadedInstruction &out) {
  // Launches on host streams run the CPU kernels, whatever the device.
  const bool hostStream = loaded.isHostStream(out.stream);
  if (hostStream)
    device = Device::kCPU;
  const KernelDef *def = registry.find(launch.kernel(), device);
  if (def == nullptr || def->run == nullptr)
    return refuse(absl::StrCat(where, ": there is no kernel \"",
                               absl::CEscape(launch.kernel()), "\" for the ",
                               deviceName(device),
                               hostStream ? " (host stream)" : "",
      " device (docs/kernels.md lists the kernels)"));
  out.kernel = def;
  if (absl::Status s =
          resolveOperands(plan, launch.inputs(), "inputs", where, out.inputs);
      !s.ok())
    return s;
  if (absl::Status s = resolveOperands(plan, launch.outputs(), "outputs", where,
                                       out.outputs);
      !s.ok())
    return s;
  if (hostStream) {
    if (absl::Status s = checkHostStreamOperands(plan, out, where); !s.ok())
      return s;
  } else if (launch.kernel() != "copy") {
    if (absl::Status s = checkNoHostOperands(plan, out, where); !s.ok())
      return s;
  }
  // Kernels assume their outputs alias nothing else of the launch (they
  // use restrict pointers); distinct tensors that share bytes while both are
  // live are refused by the arena checks, so ids suffice here.
  for (size_t k = 0; k < out.outputs.size(); ++k) {
    for (size_t j = 0; j < out.inputs.size(); ++j)
      if (out.outputs[k] == out.inputs[j])
        return refuse(absl::StrCat(
            where, ": outputs[", k, "] is ", tensorRef(plan, out.outputs[k]),
            ", which is also inputs[", j,
            "]; a kernel never writes a tensor it reads"));
    for (size_t j = 0; j < k; ++j)
      if (out.outputs[k] == out.outputs[j])
        return refuse(absl::StrCat(where, ": outputs[", k, "] is ",
                                   tensorRef(plan, out.outputs[k]),
                                   ", which is also outputs[", j, "]"));
  }
  absl::flat_hash_set<std::string> seen;
  for (int k = 0; k < launch.attrs_size(); ++k) {
    const plan::Attr &attr = launch.attrs(k);
    if (attr.name().empty())
      return refuse(absl::StrCat(where, ": attrs[", k, "] has no name"));
    if (!seen.insert(attr.name()).second)
      return refuse(absl::StrCat(where, ": parameter \"",
                                 absl::CEscape(attr.name()),
                                 "\" is given twice"));
    switch (attr.value_case()) {
    case plan::Attr::kI:
      out.params.setInt(attr.name(), attr.i());
      break;
    case plan::Attr::kF:
      out.params.setFloat(attr.name(), attr.f());
      break;
    default:
      return refuse(absl::StrCat(where, ": parameter \"",
                                 absl::CEscape(attr.name()),
                                 "\" has no value"));
    }
  }
  std::vector<TensorDesc> ins, outs;
  for (uint32_t id : out.inputs)
    ins.push_back(loaded.descs[id]);
  for (uint32_t id : out.outputs)
    outs.push_back(loaded.descs[id]);
  if (def->check != nullptr) {
    KernelSignature sig{ins, outs, &out.params};
    if (absl::Status s = def->check(sig); !s.ok())
      return refuse(absl::StrCat(where, ": ", s.message()));
  }
  return absl::OkStatus();
}

// A Stage's tensor and micro-batch.
// `extra`: the iterations after the first of the Repeat body the
// instruction is in (0 outside bodies), which offset its micro-batch or
// slot further.
absl::Status resolveStage(const plan::Plan &plan, const plan::Stage &stage,
                          uint32_t extra, const std::string &where,
                          LoadedInstruction &out) {
  out.tensor = stage.tensor();
  out.microBatch = stage.micro_batch();
  if (isHost(plan, stage.tensor()))
    return refuseHostUse(plan, where, "stages", stage.tensor());
  if (stage.tensor() >= static_cast<uint32_t>(plan.tensors_size()) ||
      plan.tensors(stage.tensor()).kind() != plan::INPUT)
    return refuse(absl::StrCat(where, ": stages tensor ", stage.tensor(),
                               ", which is not an INPUT tensor"));
  if (int64_t{stage.micro_batch()} + extra >= plan.train().num_micro_batches())
    return refuse(absl::StrCat(
        where, ": stages micro-batch ", int64_t{stage.micro_batch()} + extra,
        " but a step has plan.train.num_micro_batches = ",
        plan.train().num_micro_batches()));
  return absl::OkStatus();
}

absl::Status resolveReadback(const plan::Plan &plan,
                             const plan::Readback &readback, uint32_t extra,
                             const std::string &where,
                             LoadedInstruction &out) {
  out.tensor = readback.tensor();
  out.slot = readback.slot();
  if (isHost(plan, readback.tensor()))
    return refuseHostUse(plan, where, "reads back", readback.tensor());
  if (readback.tensor() >= static_cast<uint32_t>(plan.tensors_size()) ||
      plan.tensors(readback.tensor()).kind() != plan::SCALAR ||
      plan.tensors(readback.tensor()).dtype() != plan::F32 ||
      plan.tensors(readback.tensor()).shape_size() != 0)
    return refuse(absl::StrCat(where, ": reads back tensor ",
                               readback.tensor(),
                               ", which is not an f32 SCALAR tensor"));
  if (int64_t{readback.slot()} + extra >= plan.num_readbacks())
    return refuse(absl::StrCat(where, ": reads back into slot ",
                               int64_t{readback.slot()} + extra,
                               ", which is not below plan.num_readbacks = ",
                               plan.num_readbacks()));
  return absl::OkStatus();
}

// The two inputs and one output of an expert-parallel collective: tensors
// of the plan, all distinct.
absl::Status checkThreeTensors(const plan::Plan &plan, const uint32_t (&ids)[3],
                               const std::string &where, const char *name) {
  for (uint32_t id : ids)
    if (id >= static_cast<uint32_t>(plan.tensors_size()))
      return refuse(absl::StrCat(where, ": tensor ", id,
                                 " is not below the plan's ",
                                 plan.tensors_size(), " tensors"));
  if (ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2])
    return refuse(absl::StrCat(where, ": a ", name,
                               " reads and writes three distinct tensors"));
  return absl::OkStatus();
}

// Expert parallel's DISPATCH and COMBINE (plan.proto): along ep, data and
// counts in, one output; data and output ACTIVATION tensors of one dtype
// and row width; counts i32 ACTIVATION holding G x G x m counts.
absl::Status resolveExchange(const plan::Plan &plan,
                             const plan::Collective &c,
                             const std::string &where,
                             LoadedInstruction &out) {
  const char *name = c.kind() == plan::DISPATCH ? "DISPATCH" : "COMBINE";
  if (c.axis() != plan::EP)
    return refuse(absl::StrCat(where, ": a ", name, " runs along EP, not ",
                               plan::MeshAxis_Name(c.axis())));
  if (c.tensors_size() != 2 || c.outputs_size() != 1 || c.shift_offset() != 0)
    return refuse(absl::StrCat(
        where, ": a ", name,
        " reads two tensors (the rows and the group's counts) and writes "
        "one, and has no shift_offset; this one has ",
        c.tensors_size(), " and ", c.outputs_size()));
  const uint32_t ids[] = {c.tensors(0), c.tensors(1), c.outputs(0)};
  if (absl::Status s = checkThreeTensors(plan, ids, where, name); !s.ok())
    return s;
  const plan::Tensor &data = plan.tensors(ids[0]);
  const plan::Tensor &counts = plan.tensors(ids[1]);
  const plan::Tensor &rows = plan.tensors(ids[2]);
  const int64_t group = meshAxisSize(plan.mesh(), plan::EP);
  bool fits = data.kind() == plan::ACTIVATION &&
              rows.kind() == plan::ACTIVATION && data.dtype() == rows.dtype() &&
              data.shape_size() >= 1 && data.shape_size() == rows.shape_size();
  for (int d = 1; fits && d < data.shape_size(); ++d)
    fits = data.shape(d) == rows.shape(d);
  if (!fits)
    return refuse(absl::StrCat(
        where, ": a ", name, " moves rows of ACTIVATION ",
        tensorRef(plan, ids[0]), " (", planDTypeName(data.dtype()), " ",
        shapeString(data), ") into ACTIVATION ", tensorRef(plan, ids[2]),
        " (", planDTypeName(rows.dtype()), " ", shapeString(rows),
        "): both must be activations of one dtype and the same row shape"));
  int64_t n = 1;
  for (int64_t d : counts.shape())
    n *= d;
  if (counts.kind() != plan::ACTIVATION || counts.dtype() != plan::I32 ||
      n < group * group || n % (group * group) != 0)
    return refuse(absl::StrCat(
        where, ": the counts of a ", name, ", ", tensorRef(plan, ids[1]),
        ", must be an i32 ACTIVATION of G x G x m counts (G = ", group,
        ", the ep group's size)"));
  out.collective = c.kind();
  out.axis = c.axis();
  out.inputs = {ids[0], ids[1]};
  out.outputs = {ids[2]};
  return absl::OkStatus();
}

// Hot-expert replication's REPLICATE_EXPERTS and REDUCE_REPLICAS
// (plan.proto): along ep, f32 stacked experts (the share's parameter, its
// whole f32 copy under ZeRO, or an activation) and the i32 hot experts in,
// one f32 output of the same expert shape; the replicas [H, ...] are the
// output of the one and the input of the other, with H hot experts.
absl::Status resolveReplicas(const plan::Plan &plan, const plan::Collective &c,
                             const std::string &where,
                             LoadedInstruction &out) {
  const bool replicate = c.kind() == plan::REPLICATE_EXPERTS;
  const char *name = replicate ? "REPLICATE_EXPERTS" : "REDUCE_REPLICAS";
  if (c.axis() != plan::EP || c.tensors_size() != 2 ||
      c.outputs_size() != 1 || c.shift_offset() != 0)
    return refuse(absl::StrCat(
        where, ": a ", name,
        " runs along EP, reads two tensors (the experts and the hot "
        "experts) and writes one, and has no shift_offset"));
  const uint32_t ids[] = {c.tensors(0), c.tensors(1), c.outputs(0)};
  if (absl::Status s = checkThreeTensors(plan, ids, where, name); !s.ok())
    return s;
  const plan::Tensor &data = plan.tensors(ids[0]);
  const plan::Tensor &hot = plan.tensors(ids[1]);
  const plan::Tensor &result = plan.tensors(ids[2]);
  const plan::Tensor &replicas = replicate ? result : data;
  bool fits = data.dtype() == plan::F32 && result.dtype() == plan::F32 &&
              result.kind() == plan::ACTIVATION &&
              (data.kind() == plan::ACTIVATION ||
               (replicate && (data.kind() == plan::PARAMETER ||
                              data.kind() == plan::WEIGHT_COPY))) &&
              data.shape_size() >= 2 &&
              data.shape_size() == result.shape_size();
  for (int d = 1; fits && d < data.shape_size(); ++d)
    fits = data.shape(d) == result.shape(d);
  if (!fits)
    return refuse(absl::StrCat(
        where, ": a ", name, " moves f32 stacked experts ",
        tensorRef(plan, ids[0]), " (", planDTypeName(data.dtype()), " ",
        shapeString(data), ") into ", tensorRef(plan, ids[2]), " (",
        planDTypeName(result.dtype()), " ", shapeString(result),
        "): both f32 of one expert shape, the output an ACTIVATION"));
  if (hot.kind() != plan::ACTIVATION || hot.dtype() != plan::I32 ||
      hot.shape_size() != 1 || hot.shape(0) != replicas.shape(0))
    return refuse(absl::StrCat(
        where, ": the hot experts of a ", name, ", ", tensorRef(plan, ids[1]),
        ", must be an i32 ACTIVATION [", replicas.shape(0),
        "], one per replica"));
  // The share holds m experts of the layer's m x G; at most that many hot.
  const plan::Tensor &share = replicate ? data : result;
  const int64_t experts = share.shape(0) * meshAxisSize(plan.mesh(), plan::EP);
  if (replicas.shape(0) < 1 || replicas.shape(0) > experts)
    return refuse(absl::StrCat(
        where, ": a ", name, " with ", replicas.shape(0), " replicas of ",
        experts, " experts (", share.shape(0), " on each of the ep group's ",
        meshAxisSize(plan.mesh(), plan::EP),
        " ranks); expected 1 to that many"));
  out.collective = c.kind();
  out.axis = c.axis();
  out.inputs = {ids[0], ids[1]};
  out.outputs = {ids[2]};
  return absl::OkStatus();
}

// What a collective may read and write (plan.proto CollectiveKind): an
// all-reduce sums f32 gradients and scalars in place along any axis, and
// f32 or bf16 activations along TP (tensor parallelism's partial sums); a
// reduce-scatter sums f32 gradients into shards; an all-gather stacks
// shards of parameters, weight copies or activations into whole tensors; a
// shift passes activations one step along a ring, into activations of the
// same dtype and shape.
// The group size divides or multiplies dimension 0 as the kind says, and a
// stacked or split tensor that carries a Shard is one the collective's
// stacking makes: along its axis, on dimension 0, in one block.
absl::Status resolveCollective(const plan::Plan &plan,
                               const plan::Collective &c,
                               const std::string &where,
                               LoadedInstruction &out) {
  const plan::CollectiveKind kind = c.kind();
  if (kind == plan::DISPATCH || kind == plan::COMBINE)
    return resolveExchange(plan, c, where, out);
  if (kind == plan::REPLICATE_EXPERTS || kind == plan::REDUCE_REPLICAS)
    return resolveReplicas(plan, c, where, out);
  if (kind != plan::ALL_REDUCE_SUM && kind != plan::REDUCE_SCATTER_SUM &&
      kind != plan::ALL_GATHER && kind != plan::SHIFT)
    return refuse(absl::StrCat(where, ": the collective's kind is ", kind,
                               "; expected ALL_REDUCE_SUM, "
                               "REDUCE_SCATTER_SUM, ALL_GATHER, SHIFT, "
                               "DISPATCH, COMBINE, REPLICATE_EXPERTS or "
                               "REDUCE_REPLICAS"));
  if (c.axis() < plan::TP || c.axis() > plan::EDP)
    return refuse(absl::StrCat(where, ": the collective's axis is ", c.axis(),
                               "; expected TP, CP, PP, DP, DP_CP, EP or EDP"));
  if (c.tensors().empty())
    return refuse(absl::StrCat(where, ": the collective names no tensor"));
  const bool inPlace = kind == plan::ALL_REDUCE_SUM;
  if (inPlace ? !c.outputs().empty() : c.outputs_size() != c.tensors_size())
    return refuse(absl::StrCat(
        where, ": the collective has ", c.tensors_size(), " tensors and ",
        c.outputs_size(), " outputs; ",
        inPlace ? "an all-reduce works in place and has no outputs"
                : "each tensor needs one output"));
  out.collective = kind;
  out.axis = c.axis();
  const int64_t group = meshAxisSize(plan.mesh(), c.axis());
  const std::string axisName = planAxisName(c.axis());
  if (kind == plan::SHIFT
          ? c.shift_offset() == 0 || c.shift_offset() <= -group ||
                c.shift_offset() >= group
          : c.shift_offset() != 0)
    return refuse(absl::StrCat(
        where, ": the collective's shift_offset is ", c.shift_offset(),
        kind == plan::SHIFT
            ? absl::StrCat("; a shift along ", axisName, " (", group,
                           " ranks) moves 1 to ", group - 1,
                           " places either way")
            : "; only a SHIFT has one"));
  out.shiftOffset = c.shift_offset();
  absl::flat_hash_set<uint32_t> seen;
  auto known = [&](uint32_t id) -> absl::Status {
    if (id >= static_cast<uint32_t>(plan.tensors_size()))
      return refuse(absl::StrCat(where, ": tensor ", id,
                                 " is not below the plan's ",
                                 plan.tensors_size(), " tensors"));
    if (!seen.insert(id).second)
      return refuse(absl::StrCat(where, ": names ", tensorRef(plan, id),
                                 " twice"));
    return absl::OkStatus();
  };
  auto kindIn = [](const plan::Tensor &t,
                   std::initializer_list<plan::TensorKind> kinds) {
    return std::find(kinds.begin(), kinds.end(), t.kind()) != kinds.end();
  };
  // A Shard on the whole side of a stacking would say its rows lie
  // elsewhere than the collective puts them.
  auto stackable = [&](uint32_t id, const char *side) -> absl::Status {
    const plan::Tensor &t = plan.tensors(id);
    if (!t.has_shard())
      return absl::OkStatus();
    const plan::Shard &shard = t.shard();
    if (shard.axis() == c.axis() && shard.dim() == 0 && shard.blocks() <= 1)
      return absl::OkStatus();
    // ZeRO's rows of a TP part stack over DP into that part, of an EP
    // share over EDP.
    if (shard.dp_rows() && c.axis() == dpRowsAxis(shard))
      return absl::OkStatus();
    return refuse(absl::StrCat(
        where, ": ", side, " ", tensorRef(plan, id), " is a shard along the ",
        planAxisName(shard.axis()), " axis, dimension ", shard.dim(), ", in ",
        std::max<uint32_t>(shard.blocks(), 1),
        " blocks, but a collective along ", axisName,
        " stacks its group's parts along dimension 0 in rank order: only a "
        "shard along ",
        axisName, ", dimension 0, in one block, is such a part"));
  };
  for (int i = 0; i < c.tensors_size(); ++i) {
    const uint32_t id = c.tensors(i);
    if (absl::Status s = known(id); !s.ok())
      return s;
    const plan::Tensor &t = plan.tensors(id);
    if (inPlace) {
      const bool activation = t.kind() == plan::ACTIVATION;
      if (!kindIn(t, {plan::GRADIENT, plan::SCALAR, plan::ACTIVATION}) ||
          (activation ? t.dtype() != plan::F32 && t.dtype() != plan::BF16
                      : t.dtype() != plan::F32))
        return refuse(absl::StrCat(
            where, ": ", tensorRef(plan, id), " is ", tensorKindName(t.kind()),
            " ", planDTypeName(t.dtype()),
            "; an all-reduce sums f32 GRADIENT and SCALAR tensors, and f32 "
            "or bf16 ACTIVATION tensors along tp"));
      // Activations sum along tp (tensor parallelism's partial sums) and,
      // f32, along cp (an MoE block's expert counts).
      if (activation && c.axis() != plan::TP &&
          !(c.axis() == plan::CP && t.dtype() == plan::F32))
        return refuse(absl::StrCat(
            where, ": sums ACTIVATION ", tensorRef(plan, id), " along the ",
            axisName,
            " axis; an all-reduce sums activations along tp (tensor "
            "parallelism's partial sums) and f32 ones along cp (an MoE "
            "block's expert counts), gradients and scalars along any axis"));
      out.inputs.push_back(id);
      out.outputs.push_back(id);
      continue;
    }
    // A reduce-scatter sums f32; bf16 activations too along tp and cp
    // (sequence parallel, context parallel's key and value gradients).
    const bool bf16Activation = t.kind() == plan::ACTIVATION &&
                                t.dtype() == plan::BF16 &&
                                (c.axis() == plan::TP || c.axis() == plan::CP);
    if (kind != plan::SHIFT &&
        (kind == plan::ALL_GATHER
             ? !kindIn(t, {plan::PARAMETER, plan::WEIGHT_COPY,
                           plan::ACTIVATION})
             : !kindIn(t, {plan::GRADIENT, plan::SCALAR, plan::ACTIVATION}) ||
                   (t.dtype() != plan::F32 && !bf16Activation)))
      return refuse(absl::StrCat(
          where, ": ", tensorRef(plan, id), " is ", tensorKindName(t.kind()),
          " ", planDTypeName(t.dtype()), "; ",
          kind == plan::ALL_GATHER
              ? "an all-gather reads PARAMETER, WEIGHT_COPY or ACTIVATION "
                "tensors"
              : "a reduce-scatter sums f32 GRADIENT, SCALAR or "
                "ACTIVATION tensors, and bf16 ACTIVATION tensors along tp "
                "and cp"));
    out.inputs.push_back(id);
    const uint32_t o = c.outputs(i);
    if (absl::Status s = known(o); !s.ok())
      return s;
    if (kind == plan::SHIFT) {
      const plan::Tensor &u = plan.tensors(o);
      bool same = t.kind() == plan::ACTIVATION && u.kind() == plan::ACTIVATION &&
                  u.dtype() == t.dtype() && u.shape_size() == t.shape_size();
      for (int d = 0; same && d < t.shape_size(); ++d)
        same = t.shape(d) == u.shape(d);
      if (!same)
        return refuse(absl::StrCat(
            where, ": shifts ", tensorRef(plan, id), " (",
            tensorKindName(t.kind()), " ", planDTypeName(t.dtype()), " ",
            shapeString(t), ") into ", tensorRef(plan, o), " (",
            tensorKindName(u.kind()), " ", planDTypeName(u.dtype()), " ",
            shapeString(u),
            "); a shift moves an ACTIVATION into another of the same dtype "
            "and shape"));
      out.outputs.push_back(o);
      continue;
    }
    const plan::Tensor &u = plan.tensors(o);
    const plan::Tensor &whole = kind == plan::ALL_GATHER ? u : t;
    const plan::Tensor &part = kind == plan::ALL_GATHER ? t : u;
    bool fits = u.dtype() == t.dtype() && whole.shape_size() >= 1 &&
                whole.shape_size() == part.shape_size();
    for (int d = 0; fits && d < whole.shape_size(); ++d)
      fits = d == 0 ? whole.shape(0) % group == 0 &&
                          whole.shape(0) / group == part.shape(0)
                    : whole.shape(d) == part.shape(d);
    if (!fits)
      return refuse(absl::StrCat(
          where, ": ", tensorRef(plan, id), " is ", planDTypeName(t.dtype()),
          " ", shapeString(t), " and its output ", tensorRef(plan, o), " is ",
          planDTypeName(u.dtype()), " ", shapeString(u), "; ",
          kind == plan::ALL_GATHER ? "an all-gather's output" : "its input",
          " must have the same dtype and ", group,
          " times the first dimension (the group's size along ", axisName,
          ")"));
    if (kind == plan::ALL_GATHER
            ? !kindIn(u, {plan::WEIGHT_COPY, plan::ACTIVATION})
            : !kindIn(u, {plan::GRADIENT, plan::ACTIVATION}))
      return refuse(absl::StrCat(
          where, ": output ", tensorRef(plan, o), " is ",
          tensorKindName(u.kind()), "; ",
          kind == plan::ALL_GATHER
              ? "an all-gather writes WEIGHT_COPY or ACTIVATION tensors"
              : "a reduce-scatter writes GRADIENT or ACTIVATION tensors"));
    // The part's Shard, when the whole side has none: the collective makes
    // (or reads) the whole tensor from its group's parts stacked on dim 0.
    if (group > 1 && !whole.has_shard())
      if (absl::Status s = stackable(kind == plan::ALL_GATHER ? id : o,
                                     kind == plan::ALL_GATHER ? "input"
                                                              : "output");
          !s.ok())
        return s;
    out.outputs.push_back(o);
  }
  return absl::OkStatus();
}

// A send or receive along the pipeline axis (plan.proto PeerTransfer): a
// tensor of a dtype the communicators move, a peer that is another rank of
// this rank's pipeline, and one of the two channels. A send reads its
// tensor and a receive writes it, which the stream-order rules follow.
absl::Status resolveTransfer(const plan::Plan &plan,
                             const plan::PeerTransfer &transfer, bool send,
                             const std::string &where,
                             LoadedInstruction &out) {
  const char *what = send ? "a send" : "a receive";
  if (transfer.tensor() >= static_cast<uint32_t>(plan.tensors_size()))
    return refuse(absl::StrCat(where, ": ", send ? "sends" : "receives",
                               " tensor ", transfer.tensor(),
                               " but the plan has ", plan.tensors_size(),
                               " tensors"));
  const plan::Tensor &t = plan.tensors(transfer.tensor());
  if (t.dtype() != plan::F32 && t.dtype() != plan::BF16 &&
      t.dtype() != plan::I32)
    return refuse(absl::StrCat(where, ": ", tensorRef(plan, transfer.tensor()),
                               " is ", planDTypeName(t.dtype()), "; ", what,
                               " moves f32, bf16 or i32 tensors"));
  const int64_t pp = plan.mesh().pp();
  const int64_t offset = transfer.peer_offset();
  if (pp == 1)
    return refuse(absl::StrCat(
        where, ": ", what,
        " exchanges with another pipeline rank, but plan.mesh.pp is 1: only "
        "pipeline plans transfer"));
  if (offset == 0 || offset >= pp || -offset >= pp)
    return refuse(absl::StrCat(
        where, ": peer_offset is ", offset,
        "; it must name another pipeline rank: nonzero and less than "
        "plan.mesh.pp = ",
        pp, " in magnitude (+1 the next rank, -1 the previous)"));
  if (transfer.channel() > 1)
    return refuse(absl::StrCat(where, ": channel is ", transfer.channel(),
                               "; ", what,
                               " goes on channel 0 (activations) or 1 "
                               "(gradients)"));
  out.tensor = transfer.tensor();
  out.peerOffset = static_cast<int32_t>(offset);
  out.channel = transfer.channel();
  (send ? out.inputs : out.outputs).push_back(transfer.tensor());
  return absl::OkStatus();
}

// A Mark (plan.proto): in a STEP program, outside Repeat bodies (checked
// by the caller), of a known part and a micro-batch of the step, and on its
// stream the end of the one begun before it, or a begin after an end.
absl::Status resolveMark(const plan::Plan &plan, const plan::Program &program,
                         const plan::Mark &mark, const std::string &where,
                         std::map<uint32_t, std::string> &openMarks,
                         LoadedInstruction &out) {
  out.kind = LoadedInstruction::Kind::kMark;
  out.part = mark.part();
  out.stage = mark.stage();
  out.microBatch = mark.micro_batch();
  out.end = mark.end();
  if (program.kind() != plan::STEP)
    return refuse(absl::StrCat(where, ": only the STEP program marks its "
                                      "schedule"));
  if (mark.part() != plan::PART_F && mark.part() != plan::PART_B &&
      mark.part() != plan::PART_W)
    return refuse(absl::StrCat(where, ": the mark's part is ",
                               plan::SchedulePart_Name(mark.part()),
                               "; it must be PART_F, PART_B or PART_W"));
  if (int64_t{mark.micro_batch()} >= plan.train().num_micro_batches())
    return refuse(absl::StrCat(
        where, ": marks micro-batch ", mark.micro_batch(),
        " but a step has plan.train.num_micro_batches = ",
        plan.train().num_micro_batches()));
  const std::string what =
      absl::StrCat(plan::SchedulePart_Name(mark.part()).substr(5), " of stage ",
                   mark.stage(), " micro-batch ", mark.micro_batch());
  auto open = openMarks.find(out.stream);
  if (!mark.end()) {
    if (open != openMarks.end())
      return refuse(absl::StrCat(where, ": begins the mark of ", what,
                                 " inside the mark of ", open->second,
                                 " on the same stream"));
    openMarks[out.stream] = what;
    return absl::OkStatus();
  }
  if (open == openMarks.end() || open->second != what)
    return refuse(absl::StrCat(
        where, ": ends the mark of ", what, " on stream ", out.stream, ", ",
        open == openMarks.end() ? std::string("where none was begun")
                                : absl::StrCat("where ", open->second,
                                               " was begun")));
  openMarks.erase(open);
  return absl::OkStatus();
}

absl::Status resolveProgram(const plan::Plan &plan, int index,
                            const KernelRegistry &registry, Device device,
                            const LoadedPlan &loaded, LoadedProgram &out) {
  const plan::Program &program = plan.programs(index);
  out.name = program.name();
  out.kind = program.kind();
  std::string programRef = absl::StrCat("plan.programs[", index, "] (",
                                        absl::CEscape(program.name()), ")");
  out.instructions.reserve(program.instructions_size());
  // Per stream, the mark begun and not yet ended.
  std::map<uint32_t, std::string> openMarks;
  // The Repeat body being read: its last instruction, its stream and the
  // iterations after the first.
  int bodyEnd = -1;
  uint32_t bodyStream = 0, extra = 0;
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    std::string where = absl::StrCat(programRef, " instruction ", i);
    LoadedInstruction loadedInst;
    if (inst.stream() >= plan.num_streams())
      return refuse(absl::StrCat(
          where, ": stream ", inst.stream(),
          " is not below plan.num_streams = ", plan.num_streams()));
    loadedInst.stream = inst.stream();
    if (i > bodyEnd)
      extra = 0;
    const bool inBody = i <= bodyEnd;
    if (inBody && inst.stream() != bodyStream)
      return refuse(absl::StrCat(where, ": is on stream ", inst.stream(),
                                 " inside a Repeat body on stream ",
                                 bodyStream, "; a body runs on one stream"));
    // Tensor and context parallelism sum, gather and pass on each
    // micro-batch's activations, and expert parallel exchanges its tokens,
    // so a body may hold collectives along TP, CP and EP (each iteration
    // runs them); the others reduce once per step, after the micro-batches.
    if (inBody && inst.op_case() == plan::Instruction::kCollective &&
        inst.collective().axis() != plan::TP &&
        inst.collective().axis() != plan::CP &&
        inst.collective().axis() != plan::EP)
      return refuse(absl::StrCat(
          where, ": a collective along the ",
          planAxisName(inst.collective().axis()),
          " axis inside a Repeat body; a body holds launches, stages, "
          "readbacks and collectives along tp, cp and ep only"));
    if (inBody && (inst.op_case() == plan::Instruction::kRecord ||
                   inst.op_case() == plan::Instruction::kWait ||
                   inst.op_case() == plan::Instruction::kRepeat ||
                   inst.op_case() == plan::Instruction::kSend ||
                   inst.op_case() == plan::Instruction::kRecv ||
                   inst.op_case() == plan::Instruction::kMark))
      return refuse(absl::StrCat(where, ": a Repeat body holds launches, "
                                        "stages, readbacks and collectives "
                                        "along tp, cp and ep only"));
    // A host stream runs launches (and records, waits, repeats and marks);
    // what moves data to, from or between devices runs on device streams.
    if (loaded.isHostStream(inst.stream()) &&
        (inst.op_case() == plan::Instruction::kStage ||
         inst.op_case() == plan::Instruction::kReadback ||
         inst.op_case() == plan::Instruction::kCollective ||
         inst.op_case() == plan::Instruction::kSend ||
         inst.op_case() == plan::Instruction::kRecv))
      return refuse(absl::StrCat(
          where, ": a ",
          inst.op_case() == plan::Instruction::kStage      ? "stage"
          : inst.op_case() == plan::Instruction::kReadback ? "readback"
          : inst.op_case() == plan::Instruction::kCollective
              ? "collective"
          : inst.op_case() == plan::Instruction::kSend ? "send"
                                                       : "receive",
          " on host stream ", inst.stream(),
          ": only launches, records, waits, repeats and marks run on a host "
          "stream (plan.host_streams)"));
    switch (inst.op_case()) {
    case plan::Instruction::kLaunch:
      where = absl::StrCat(where, " (kernel ",
                           absl::CEscape(inst.launch().kernel()), ")");
      loadedInst.kind = LoadedInstruction::Kind::kLaunch;
      loadedInst.microBatch = inst.launch().micro_batch();
      if (int64_t{inst.launch().micro_batch()} + extra >=
          (program.kind() == plan::STEP ? plan.train().num_micro_batches()
                                        : 1))
        return refuse(absl::StrCat(
            where, ": computes micro-batch ",
            int64_t{inst.launch().micro_batch()} + extra,
            program.kind() == plan::STEP
                ? absl::StrCat(" but a step has plan.train.num_micro_batches"
                               " = ",
                               plan.train().num_micro_batches())
                : std::string(" but INIT computes no micro-batch (0)")));
      if (absl::Status s = resolveLaunch(plan, inst.launch(), registry, device,
                                         loaded, where, loadedInst);
          !s.ok())
        return s;
      break;
    case plan::Instruction::kStage:
    case plan::Instruction::kReadback: {
      if (program.kind() != plan::STEP)
        return refuse(absl::StrCat(where, ": only the STEP program stages "
                                          "inputs and reads back scalars"));
      const bool stage = inst.op_case() == plan::Instruction::kStage;
      loadedInst.kind = stage ? LoadedInstruction::Kind::kStage
                              : LoadedInstruction::Kind::kReadback;
      if (absl::Status s =
              stage ? resolveStage(plan, inst.stage(), extra, where,
                                   loadedInst)
                    : resolveReadback(plan, inst.readback(), extra, where,
                                      loadedInst);
          !s.ok())
        return s;
      break;
    }
    case plan::Instruction::kRepeat: {
      const plan::Repeat &repeat = inst.repeat();
      loadedInst.kind = LoadedInstruction::Kind::kRepeat;
      loadedInst.count = repeat.count();
      loadedInst.length = repeat.length();
      if (program.kind() != plan::STEP)
        return refuse(absl::StrCat(where, ": only the STEP program repeats "
                                          "instructions"));
      if (repeat.count() == 0 ||
          repeat.count() > plan.train().num_micro_batches())
        return refuse(absl::StrCat(
            where, ": repeats ", repeat.count(),
            " times; a Repeat runs 1 to plan.train.num_micro_batches = ",
            plan.train().num_micro_batches(), " times"));
      if (repeat.length() == 0 ||
          repeat.length() >= static_cast<uint32_t>(
                                 program.instructions_size() - i))
        return refuse(absl::StrCat(
            where, ": a body of ", repeat.length(), " instructions, but ",
            program.instructions_size() - i - 1,
            " follow; a body has at least one"));
      bodyEnd = i + static_cast<int>(repeat.length());
      bodyStream = inst.stream();
      extra = repeat.count() - 1;
      break;
    }
    case plan::Instruction::kCollective:
      loadedInst.kind = LoadedInstruction::Kind::kCollective;
      for (const auto *ids :
           {&inst.collective().tensors(), &inst.collective().outputs()})
        if (std::optional<uint32_t> id = firstHost(plan, *ids))
          return refuseHostUse(plan, where, "the collective names", *id);
      if (absl::Status s =
              resolveCollective(plan, inst.collective(), where, loadedInst);
          !s.ok())
        return s;
      break;
    case plan::Instruction::kSend:
    case plan::Instruction::kRecv: {
      const bool send = inst.op_case() == plan::Instruction::kSend;
      where = absl::StrCat(where, send ? " (send)" : " (recv)");
      loadedInst.kind = send ? LoadedInstruction::Kind::kSend
                             : LoadedInstruction::Kind::kRecv;
      const plan::PeerTransfer &transfer = send ? inst.send() : inst.recv();
      if (isHost(plan, transfer.tensor()))
        return refuseHostUse(plan, where, send ? "sends" : "receives",
                             transfer.tensor());
      if (absl::Status s =
              resolveTransfer(plan, transfer, send, where, loadedInst);
          !s.ok())
        return s;
      break;
    }
    case plan::Instruction::kMark:
      if (absl::Status s = resolveMark(plan, program, inst.mark(), where,
                                       openMarks, loadedInst);
          !s.ok())
        return s;
      break;
    case plan::Instruction::kRecord:
    case plan::Instruction::kWait: {
      const bool record = inst.op_case() == plan::Instruction::kRecord;
      loadedInst.kind = record ? LoadedInstruction::Kind::kRecord
                               : LoadedInstruction::Kind::kWait;
      loadedInst.event = record ? inst.record().event() : inst.wait().event();
      loadedInst.value = record ? inst.record().value() : inst.wait().value();
      if (loadedInst.event >= plan.num_events())
        return refuse(absl::StrCat(
            where, record ? ": records" : ": waits for", " event ",
            loadedInst.event,
            ", which is not below plan.num_events = ", plan.num_events()));
      break;
    }
    default:
      return refuse(absl::StrCat(
          where, ": the instruction has no operation (launch, record, wait, "
                 "stage, readback, repeat, collective, send, recv or "
                 "mark)"));
    }
    out.instructions.push_back(std::move(loadedInst));
  }
  for (const auto &[stream, open] : openMarks)
    return refuse(absl::StrCat(programRef, ": the mark of ", open,
                               " on stream ", stream, " has no end"));
  int64_t bad = 0;
  if (std::optional<std::string> why = checkEvents(orderSteps(out), &bad))
    return refuse(absl::StrCat(programRef, " instruction ", bad, ": ", *why));
  return absl::OkStatus();
}

} // namespace

namespace {

// Whether the byte ranges `written` (any order, may overlap) cover
// [begin, end).
bool covers(std::vector<std::pair<uint64_t, uint64_t>> written, uint64_t begin,
            uint64_t end) {
  std::sort(written.begin(), written.end());
  for (const auto &[from, to] : written) {
    if (begin >= end)
      break;
    if (from > begin)
      return false;
    begin = std::max(begin, to);
  }
  return begin >= end;
}

// A Repeat body's transients are its own: each is written in the body
// before the body reads it (no value carries from one iteration to the
// next), and no instruction outside the body uses it. Then one pass over
// the body is the lifetime of every iteration, which the arena checks
// follow. Views follow bytes: a read needs every byte it reads written
// earlier in the body, through the tensor, its base or any view of that
// base; and a base one of whose views the body writes (or the reverse) is
// the body's transient as a whole.
absl::Status checkRepeatBodies(const plan::Plan &plan,
                               const LoadedProgram &program) {
  const auto &insts = program.instructions;
  auto isTransient = [&](uint32_t id) {
    return plan.tensors(id).kind() == plan::ACTIVATION;
  };
  // base tensor -> Repeat index
  absl::flat_hash_map<uint32_t, size_t> bodyOf;
  for (size_t i = 0; i < insts.size(); ++i) {
    if (insts[i].kind != LoadedInstruction::Kind::kRepeat)
      continue;
    // base tensor -> the byte ranges of it written so far
    absl::flat_hash_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>>
        written;
    const size_t end = i + 1 + insts[i].length;
    for (size_t k = i + 1; k < end; ++k) {
      for (uint32_t id : insts[k].inputs) {
        if (!isTransient(id))
          continue;
        const plan::Tensor &t = plan.tensors(id);
        auto w = written.find(viewBase(plan, id));
        if (w == written.end() ||
            !covers(w->second, t.offset(), t.offset() + t.size_bytes()))
          return refuse(absl::StrCat(
              "plan.programs (", program.name, ") instruction ", k,
              ": reads ", tensorRef(plan, id),
              " before its Repeat body writes ",
              w == written.end() ? "it" : "all of its bytes",
              ", so a value would carry from one iteration into the next"));
      }
      for (uint32_t id : insts[k].outputs)
        if (isTransient(id)) {
          const plan::Tensor &t = plan.tensors(id);
          written[viewBase(plan, id)].push_back(
              {t.offset(), t.offset() + t.size_bytes()});
          bodyOf[viewBase(plan, id)] = i;
        }
    }
    i = end - 1;
  }
  for (size_t i = 0; i < insts.size(); ++i) {
    if (insts[i].kind == LoadedInstruction::Kind::kRepeat) {
      i += insts[i].length;
      continue;
    }
    for (const auto *ids : {&insts[i].inputs, &insts[i].outputs})
      for (uint32_t id : *ids) {
        const uint32_t base = viewBase(plan, id);
        if (bodyOf.contains(base))
          return refuse(absl::StrCat(
              "plan.programs (", program.name, ") instruction ", i,
              ": uses ", tensorRef(plan, id),
              base == id ? std::string()
                         : absl::StrCat(", a view of ", tensorRef(plan, base)),
              ", a transient of the Repeat body at instruction ",
              bodyOf[base], "; a body's transients are used inside it only"));
      }
  }
  return absl::OkStatus();
}

// Every micro-batch stages every INPUT tensor exactly once. A pipeline
// rank's schedule may hold several micro-batches in flight, and a backward
// that reads an input (the embedding's, the tokens) stages it again: in a
// stage plan, at least once. (Staging copies the same values each time.)
// A stage plan may also hold an INPUT its stages never read, which it then
// never stages: the loaded plan forgets its role, so nothing is staged for
// it.
absl::Status checkStaging(const plan::Plan &plan, const LoadedProgram &step,
                          PlanScope scope, LoadedPlan &loaded) {
  const int64_t numMicro = plan.train().num_micro_batches();
  absl::flat_hash_map<std::pair<uint32_t, int64_t>, int> staged;
  absl::Status twice = forEachRun(
      step.instructions,
      [&](const LoadedInstruction &inst, int64_t it) -> absl::Status {
        if (inst.kind != LoadedInstruction::Kind::kStage)
          return absl::OkStatus();
        const int64_t m = inst.microBatch + it;
        if (++staged[{inst.tensor, m}] > 1 && scope == PlanScope::kWhole)
          return refuse(absl::StrCat("the STEP program stages ",
                                     tensorRef(plan, inst.tensor),
                                     " for micro-batch ", m, " twice"));
        return absl::OkStatus();
      });
  if (!twice.ok())
    return twice;
  absl::flat_hash_set<uint32_t> used;
  for (const LoadedProgram &program : loaded.programs)
    for (const LoadedInstruction &inst : program.instructions)
      for (const auto *ids : {&inst.inputs, &inst.outputs})
        used.insert(ids->begin(), ids->end());
  for (int id = 0; id < plan.tensors_size(); ++id) {
    if (plan.tensors(id).kind() != plan::INPUT)
      continue;
    const uint32_t input = static_cast<uint32_t>(id);
    bool any = false;
    for (int64_t m = 0; m < numMicro && !any; ++m)
      any = staged.contains({input, m});
    if (!any && !used.contains(input) && scope == PlanScope::kStage) {
      for (std::optional<uint32_t> *role :
           {&loaded.tokens, &loaded.labels, &loaded.positions})
        if (*role == input)
          role->reset();
      continue;
    }
    for (int64_t m = 0; m < numMicro; ++m)
      if (!staged.contains({input, m}))
        return refuse(absl::StrCat(
            "the STEP program never stages ", tensorRef(plan, id),
            " for micro-batch ", m, ": every micro-batch reads its own "
            "inputs"));
  }
  return absl::OkStatus();
}

// Each slot is filled once, and the plan's readback fields name slots
// holding the scalars they say. A stage plan may leave a slot no field
// names unfilled (a pipeline rank that computes no loss keeps the slots the
// loss stage's rank fills, which nothing reads).
absl::Status checkReadbacks(const plan::Plan &plan, const LoadedProgram &step,
                            PlanScope scope) {
  if (plan.num_readbacks() > kMaxReadbacks)
    return refuse(absl::StrCat("plan.num_readbacks is ", plan.num_readbacks(),
                               "; a plan has at most ", kMaxReadbacks));
  std::vector<int64_t> tensorOfSlot(plan.num_readbacks(), -1);
  absl::Status twice = forEachRun(
      step.instructions,
      [&](const LoadedInstruction &inst, int64_t it) -> absl::Status {
        if (inst.kind != LoadedInstruction::Kind::kReadback)
          return absl::OkStatus();
        const auto slot = static_cast<uint32_t>(inst.slot + it);
        if (tensorOfSlot[slot] >= 0)
          return refuse(absl::StrCat(
              "the STEP program reads back into slot ", slot, " twice"));
        tensorOfSlot[slot] = inst.tensor;
        return absl::OkStatus();
      });
  if (!twice.ok())
    return twice;
  for (uint32_t slot = 0; slot < plan.num_readbacks(); ++slot)
    if (tensorOfSlot[slot] < 0 && scope == PlanScope::kWhole)
      return refuse(absl::StrCat("readback slot ", slot, " of ",
                                 plan.num_readbacks(),
                                 " is never filled by the STEP program"));
  // A pipeline rank that computes no loss reads none back (the pipeline's
  // checks require one rank that does).
  const bool noLosses =
      scope == PlanScope::kStage && plan.loss_readbacks_size() == 0;
  if (plan.loss_readbacks_size() != plan.train().num_micro_batches() &&
      !noLosses)
    return refuse(absl::StrCat(
        "plan.loss_readbacks has ", plan.loss_readbacks_size(),
        " slots but a step has plan.train.num_micro_batches = ",
        plan.train().num_micro_batches(), ": one loss per micro-batch",
        scope == PlanScope::kStage
            ? " (or none, on a pipeline rank that computes no loss)"
            : ""));
  std::vector<std::pair<std::string, uint32_t>> fields;
  for (int m = 0; m < plan.loss_readbacks_size(); ++m)
    fields.push_back({absl::StrCat("loss_readbacks[", m, "]"),
                      plan.loss_readbacks(m)});
  fields.push_back({"grad_norm_readback", plan.grad_norm_readback()});
  fields.push_back({"step_skipped_readback", plan.step_skipped_readback()});
  absl::flat_hash_set<uint32_t> used;
  for (size_t k = 0; k < fields.size(); ++k) {
    const auto &[field, slot] = fields[k];
    const uint32_t want = k + 2 < fields.size()   ? plan.loss_tensor()
                          : k + 2 == fields.size() ? plan.grad_norm_tensor()
                                                   : plan.step_skipped_tensor();
    if (slot >= plan.num_readbacks())
      return refuse(absl::StrCat("plan.", field, " is slot ", slot,
                                 ", which is not below plan.num_readbacks = ",
                                 plan.num_readbacks()));
    if (!used.insert(slot).second)
      return refuse(absl::StrCat("plan.", field, " is slot ", slot,
                                 ", which another readback field names too"));
    if (tensorOfSlot[slot] < 0)
      return refuse(absl::StrCat("plan.", field, " is slot ", slot,
                                 ", which the STEP program never fills"));
    if (tensorOfSlot[slot] != want)
      return refuse(absl::StrCat(
          "plan.", field, " is slot ", slot, ", but the STEP program reads ",
          tensorRef(plan, static_cast<uint32_t>(tensorOfSlot[slot])),
          " into it, not ", tensorRef(plan, want)));
  }
  return absl::OkStatus();
}

} // namespace

absl::Status checkPrograms(const plan::Plan &plan,
                           const KernelRegistry &registry, Device device,
                           PlanScope scope, LoadedPlan &loaded) {
  loaded.hostStreams.assign(plan.num_streams(), false);
  for (uint32_t s : plan.host_streams())
    if (s < plan.num_streams())
      loaded.hostStreams[s] = true;
  absl::flat_hash_set<std::string> names;
  const LoadedProgram *step = nullptr;
  const LoadedProgram *init = nullptr;
  loaded.programs.resize(plan.programs_size());
  for (int p = 0; p < plan.programs_size(); ++p) {
    const plan::Program &program = plan.programs(p);
    const std::string &name = program.name();
    if (name.empty())
      return refuse(absl::StrCat("plan.programs[", p, "] has no name"));
    if (!names.insert(name).second)
      return refuse(absl::StrCat("plan.programs[", p,
                                 "]: a second program named \"",
                                 absl::CEscape(name), "\""));
    if (program.kind() != plan::STEP && program.kind() != plan::INIT)
      return refuse(absl::StrCat("plan.programs[", p, "] (",
                                 absl::CEscape(name),
                                 ") has kind ", program.kind(),
                                 ", neither STEP nor INIT"));
    const LoadedProgram *&slot = program.kind() == plan::STEP ? step : init;
    if (slot != nullptr)
      return refuse(absl::StrCat("plan.programs[", p, "] (",
                                 absl::CEscape(name), ") is a second ",
                                 kindName(program.kind()),
                                 " program; a plan has one"));
    if (absl::Status s = resolveProgram(plan, p, registry, device, loaded,
                                        loaded.programs[p]);
        !s.ok())
      return s;
    slot = &loaded.programs[p];
  }
  if (step == nullptr)
    return refuse("the plan has no STEP program: it is required");
  if (absl::Status s = checkRepeatBodies(plan, *step); !s.ok())
    return s;
  if (absl::Status s = checkStaging(plan, *step, scope, loaded); !s.ok())
    return s;
  if (absl::Status s = checkReadbacks(plan, *step, scope); !s.ok())
    return s;
  // The weight copies start as zeros: INIT must fill them before the
  // first step reads them.
  if (!loaded.weightCopies.empty() && init == nullptr)
    return refuse(absl::StrCat(
        "the plan has ", loaded.weightCopies.size(),
        " WEIGHT_COPY tensors but no INIT program: one is required to fill "
        "them from the parameters before the first step"));
  return absl::OkStatus();
}

} // namespace braid::plan_checks
