// Programs: every instruction's stream, operands, kernel and event, checked
// and resolved into LoadedInstructions.
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"

namespace braid::plan_checks {
namespace {

constexpr const char *kRequiredPrograms[] = {"micro_batch", "optimizer"};

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

absl::Status resolveLaunch(const plan::Plan &plan, const plan::Launch &launch,
                           const KernelRegistry &registry, Device device,
                           const LoadedPlan &loaded, const std::string &where,
                           LoadedInstruction &out) {
  const KernelDef *def = registry.find(launch.kernel(), device);
  if (def == nullptr || def->run == nullptr)
    return refuse(absl::StrCat(where, ": there is no kernel \"",
                               absl::CEscape(launch.kernel()), "\" for the ",
                               deviceName(device),
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

absl::Status resolveProgram(const plan::Plan &plan, int index,
                            const KernelRegistry &registry, Device device,
                            const LoadedPlan &loaded, LoadedProgram &out) {
  const plan::Program &program = plan.programs(index);
  out.name = program.name();
  std::string programRef = absl::StrCat("plan.programs[", index, "] (",
                                        absl::CEscape(program.name()), ")");
  // Records of each event seen so far in program order.
  std::vector<int64_t> records(plan.num_events(), 0);
  out.instructions.reserve(program.instructions_size());
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    std::string where = absl::StrCat(programRef, " instruction ", i);
    LoadedInstruction loadedInst;
    if (inst.stream() >= plan.num_streams())
      return refuse(absl::StrCat(
          where, ": stream ", inst.stream(),
          " is not below plan.num_streams = ", plan.num_streams()));
    loadedInst.stream = inst.stream();
    switch (inst.op_case()) {
    case plan::Instruction::kLaunch:
      where = absl::StrCat(where, " (kernel ",
                           absl::CEscape(inst.launch().kernel()), ")");
      loadedInst.kind = LoadedInstruction::Kind::kLaunch;
      if (absl::Status s = resolveLaunch(plan, inst.launch(), registry, device,
                                         loaded, where, loadedInst);
          !s.ok())
        return s;
      break;
    case plan::Instruction::kRecord:
      loadedInst.kind = LoadedInstruction::Kind::kRecord;
      loadedInst.event = inst.record().event();
      if (loadedInst.event >= plan.num_events())
        return refuse(absl::StrCat(
            where, ": records event ", loadedInst.event,
            ", which is not below plan.num_events = ", plan.num_events()));
      ++records[loadedInst.event];
      break;
    case plan::Instruction::kWait:
      loadedInst.kind = LoadedInstruction::Kind::kWait;
      loadedInst.event = inst.wait().event();
      if (loadedInst.event >= plan.num_events())
        return refuse(absl::StrCat(
            where, ": waits for event ", loadedInst.event,
            ", which is not below plan.num_events = ", plan.num_events()));
      if (records[loadedInst.event] == 0)
        return refuse(absl::StrCat(
            where, ": waits for event ", loadedInst.event,
            " before any instruction records it, so stream ", inst.stream(),
            " would deadlock; record the event earlier in the program"));
      loadedInst.waitTarget = records[loadedInst.event];
      break;
    default:
      return refuse(absl::StrCat(
          where, ": the instruction has no operation (launch, record or "
                 "wait)"));
    }
    out.instructions.push_back(std::move(loadedInst));
  }
  return absl::OkStatus();
}

} // namespace

absl::Status checkPrograms(const plan::Plan &plan,
                           const KernelRegistry &registry, Device device,
                           LoadedPlan &loaded) {
  absl::flat_hash_set<std::string> names;
  loaded.programs.resize(plan.programs_size());
  for (int p = 0; p < plan.programs_size(); ++p) {
    const std::string &name = plan.programs(p).name();
    if (name.empty())
      return refuse(absl::StrCat("plan.programs[", p, "] has no name"));
    if (!names.insert(name).second)
      return refuse(absl::StrCat("plan.programs[", p,
                                 "]: a second program named \"",
                                 absl::CEscape(name), "\""));
    if (absl::Status s = resolveProgram(plan, p, registry, device, loaded,
                                        loaded.programs[p]);
        !s.ok())
      return s;
  }
  for (const char *required : kRequiredPrograms) {
    if (!names.contains(required))
      return refuse(absl::StrCat("the plan has no program named \"", required,
                                 "\": it is required"));
  }
  // The weight copies start as zeros: "init" must fill them before the
  // first micro-batch reads them.
  if (!loaded.weightCopies.empty() && !names.contains("init"))
    return refuse(absl::StrCat(
        "the plan has ", loaded.weightCopies.size(),
        " WEIGHT_COPY tensors but no program named \"init\": one is "
        "required to fill them from the parameters before the first "
        "micro-batch"));
  return absl::OkStatus();
}

} // namespace braid::plan_checks
