// The validation passes loadPlan runs, one file per group of rules. Each
// takes the parsed proto and fills its part of the LoadedPlan; each returns
// InvalidArgument naming the first rule broken. They run in the order
// declared here, and a later pass may rely on what an earlier one checked
// (for instance, program checks assume tensor shapes are valid).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/StreamOrder.h"

namespace braid::plan_checks {

// "plan.tensors[3] (model.norm.weight)": how messages name a tensor.
std::string tensorRef(const plan::Plan &plan, uint32_t id);
// "[2, 8, 16]": how messages print a tensor's shape.
std::string shapeString(const plan::Tensor &tensor);
// The number of ranks along `axis` of the plan's mesh (1 for an axis the
// mesh leaves unset).
int64_t meshAxisSize(const plan::Mesh &mesh, plan::MeshAxis axis);
// InvalidArgument with `message`: how every rule refuses a plan.
absl::Status refuse(std::string message);

// format_version, num_streams, num_events, model and train settings.
absl::Status checkHeader(const plan::Plan &plan);
absl::Status checkTrainConfig(const plan::Plan &plan);

// Tensor table: ids, names, dtypes, shapes, sizes, offsets. Fills
// loaded.descs and loaded.tensorsByName.
absl::Status checkTensors(const plan::Plan &plan, LoadedPlan &loaded);

// Inputs, loss and grad-norm tensors, parameter infos. Fills loaded.tokens,
// labels, positions and parameters.
absl::Status checkRoles(const plan::Plan &plan, LoadedPlan &loaded);

// Programs and instructions: kernels, operands, streams, events. Fills
// loaded.programs.
absl::Status checkPrograms(const plan::Plan &plan,
                           const KernelRegistry &registry, Device device,
                           LoadedPlan &loaded);

// The instructions of `program` as ordering sees them (StreamOrder.h).
std::vector<OrderStep> orderSteps(const LoadedProgram &program);

// Arena layout: no persistent tensor shares bytes with anything; activations
// share bytes only when their live ranges are disjoint. Needs the programs.
absl::Status checkArenaLayout(const plan::Plan &plan, const LoadedPlan &loaded);

} // namespace braid::plan_checks
