#include "runtime/plan/PlanLoader.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "runtime/io/WholeFile.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/PlanFile.h"

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
  const plan::Plan &plan = loaded.proto;
  if (absl::Status s = plan_checks::checkHeader(plan); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTrainConfig(plan); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkTensors(plan, loaded); !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkRoles(plan, loaded); !s.ok())
    return s;
  if (absl::Status s =
          plan_checks::checkPrograms(plan, registry, device, loaded);
      !s.ok())
    return s;
  if (absl::Status s = plan_checks::checkArenaLayout(plan, loaded); !s.ok())
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
