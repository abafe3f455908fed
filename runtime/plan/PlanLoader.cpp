#include "runtime/plan/PlanLoader.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/logging.h"
#include "runtime/io/WholeFile.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/StagePlan.h"

namespace braid {

const LoadedProgram *LoadedPlan::program(plan::ProgramKind kind) const {
  for (const LoadedProgram &p : programs)
    if (p.kind == kind)
      return &p;
  return nullptr;
}

std::optional<uint32_t> LoadedPlan::findTensor(std::string_view name) const {
  auto it = tensorsByName.find(absl::string_view(name.data(), name.size()));
  if (it == tensorsByName.end())
    return std::nullopt;
  return it->second;
}

namespace {

using plan_checks::PlanScope;
using plan_checks::refuse;

// Every rule of one plan, whole or a pipeline rank's, in the order of
// docs/plan-format.md.
absl::Status validate(const KernelRegistry &registry, PlanScope scope,
                      LoadedPlan &loaded) {
  const plan::Plan &plan = loaded.proto;
  if (absl::Status s = plan_checks::checkHeader(plan); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTrainConfig(plan); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTensors(plan, loaded); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkRoles(plan, scope, loaded); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkPrograms(plan, registry,
                                                  loaded.device, scope, loaded);
      !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTransferOrder(plan, loaded); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkArenaLayout(plan, loaded); !s.ok())
    return s;
  return absl::OkStatus();
}

// The fields of `plan` that are set, by name.
std::vector<std::string> setFields(const plan::Plan &plan) {
  std::vector<const google::protobuf::FieldDescriptor *> fields;
  plan.GetReflection()->ListFields(plan, &fields);
  std::vector<std::string> names;
  for (const google::protobuf::FieldDescriptor *f : fields)
    names.push_back(f->name());
  return names;
}

bool isHeaderField(const std::string &name) {
  return name == "format_version" || name == "name" || name == "model" ||
         name == "train" || name == "mesh";
}

// The outer plan of a pipeline carries the header and the stage plans; each
// stage plan everything else of one rank, and no header of its own, so
// that no stage can disagree with another on what they share.
absl::Status checkPipelineShape(const plan::Plan &plan) {
  const int64_t pp = plan.mesh().pp();
  if (pp == 1)
    return refuse(absl::StrCat(
        "plan.stage_plans has ", plan.stage_plans_size(),
        " plans but plan.mesh.pp is 1: only a pipeline plan (pp above 1) has "
        "stage plans"));
  if (plan.stage_plans_size() != pp)
    return refuse(absl::StrCat(
        "plan.stage_plans has ", plan.stage_plans_size(),
        " plans but plan.mesh.pp is ", pp,
        ": a pipeline plan has one stage plan per pipeline rank, in PP "
        "coordinate order"));
  for (const std::string &field : setFields(plan))
    if (!isHeaderField(field) && field != "stage_plans")
      return refuse(absl::StrCat(
          "plan.", field,
          " is set in a pipeline plan, whose outer plan carries only the "
          "header (format_version, name, model, train, mesh) and "
          "plan.stage_plans: each pipeline rank's tensors, programs, "
          "streams, events, memory report and readbacks belong in its stage "
          "plan"));
  for (int k = 0; k < plan.stage_plans_size(); ++k)
    for (const std::string &field : setFields(plan.stage_plans(k)))
      if (isHeaderField(field) || field == "stage_plans")
        return refuse(absl::StrCat(
            "plan.stage_plans[", k, "].", field,
            " is set: a stage plan carries no header of its own (the outer "
            "plan's format_version, name, model, train and mesh apply to "
            "every stage) and no stage plans"));
  return absl::OkStatus();
}

absl::Status loadPipeline(const KernelRegistry &registry, LoadedPlan &loaded) {
  plan::Plan &plan = loaded.proto;
  if (absl::Status s = plan_checks::checkHeader(plan, /*streams=*/false);
      !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTrainConfig(plan); !s.ok())
    return s;
  if (absl::Status s = checkPipelineShape(plan); !s.ok())
    return s;
  for (int k = 0; k < plan.stage_plans_size(); ++k) {
    LoadedPlan &stage = loaded.stages.emplace_back();
    stage.device = loaded.device;
    stage.proto = takeEffectiveStagePlan(plan, k);
    if (absl::Status s = validate(registry, PlanScope::kStage, stage); !s.ok())
      return refuse(stageMessage(std::string(s.message()), k));
  }
  plan.clear_stage_plans();
  return plan_checks::checkPipeline(loaded);
}

} // namespace

absl::StatusOr<LoadedPlan> loadPlan(std::string_view bytes,
                                    const KernelRegistry &registry,
                                    Device device) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return absl::InvalidArgumentError(
        absl::StrCat("the plan is ", bytes.size(),
                     " bytes; plans larger than 2 GiB are not supported"));
  LoadedPlan loaded;
  loaded.device = device;
  bool parsed;
  {
    // Protobuf logs its own complaint (invalid UTF-8, say) to stderr before
    // failing; the message below is the one a user should read.
    google::protobuf::LogSilencer quiet;
    parsed = loaded.proto.ParseFromArray(bytes.data(),
                                         static_cast<int>(bytes.size()));
  }
  if (!parsed)
    return absl::InvalidArgumentError(
        "the plan does not parse as a braid.plan.Plan (protobuf parsing "
        "failed)");
  absl::Status s = isPipelinePlan(loaded.proto)
                       ? loadPipeline(registry, loaded)
                       : validate(registry, PlanScope::kWhole, loaded);
  if (!s.ok())
    return s;
  return loaded;
}

absl::StatusOr<LoadedPlan> loadPlanFile(const std::string &path,
                                        const KernelRegistry &registry,
                                        Device device) {
  absl::StatusOr<std::string> bytes = readWholeFile(path, "plan");
  if (!bytes.ok())
    return bytes.status();
  return loadSealedPlan(*bytes, absl::StrCat("the plan file '", path, "'"),
                        PlanSource::kFile, registry, device);
}

absl::StatusOr<LoadedPlan> loadSealedPlan(std::string_view bytes,
                                          const std::string &origin,
                                          PlanSource source,
                                          const KernelRegistry &registry,
                                          Device device) {
  absl::StatusOr<std::string_view> plan = unsealPlan(bytes, origin, source);
  if (!plan.ok())
    return plan.status();
  absl::StatusOr<LoadedPlan> loaded = loadPlan(*plan, registry, device);
  if (!loaded.ok())
    return absl::Status(loaded.status().code(),
                        absl::StrCat(origin, ": ", loaded.status().message()));
  return loaded;
}

} // namespace braid
