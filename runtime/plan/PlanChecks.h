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

// What a plan is to the rules: a whole plan, or the effective plan of one
// pipeline rank (StagePlan.h), which holds only its stages of the model and
// so may lack an input role (the tokens are the first stage's, the labels
// the loss stage's) or the loss readbacks.
enum class PlanScope { kWhole, kStage };

// format_version, mesh, model, and with `streams` num_streams and
// num_events (a pipeline's outer plan has neither: its stage plans do).
absl::Status checkHeader(const plan::Plan &plan, bool streams = true);
absl::Status checkTrainConfig(const plan::Plan &plan);

// Tensor table: ids, names, dtypes, shapes, sizes, offsets, views, host
// tensors (each within its arena: memory.arena_bytes, or memory.host_bytes
// for a host tensor). Fills loaded.descs and loaded.tensorsByName.
absl::Status checkTensors(const plan::Plan &plan, LoadedPlan &loaded);

// The tensor that owns the bytes `id` uses: the base of a view (plan.proto
// Tensor.view_of), `id` itself otherwise. For the passes after
// checkTensors, which has checked every view_of.
uint32_t viewBase(const plan::Plan &plan, uint32_t id);

// Inputs, loss and grad-norm tensors, parameter infos. Fills loaded.tokens,
// labels, positions and parameters.
absl::Status checkRoles(const plan::Plan &plan, PlanScope scope,
                        LoadedPlan &loaded);

// Programs and instructions: kernels, operands, streams, events; no
// instruction but a copy launch names a host tensor. Fills loaded.programs.
absl::Status checkPrograms(const plan::Plan &plan,
                           const KernelRegistry &registry, Device device,
                           PlanScope scope, LoadedPlan &loaded);

// Sends and receives within one plan: those of one channel with one peer,
// in one direction, are ordered by streams and events (they are matched
// with the peer's in program order, so they must be posted in it).
absl::Status checkTransferOrder(const plan::Plan &plan,
                                const LoadedPlan &loaded);

// What the stages of a validated pipeline plan must agree on: each
// parameter (and tied alias) in one stage plan only, the losses read back
// by exactly one (which sets pipeline.lossStage), and every send met by a
// receive of the same dtype and size, in order, on its channel.
absl::Status checkPipeline(LoadedPlan &pipeline);

// The instructions of `program` as ordering sees them (StreamOrder.h).
std::vector<OrderStep> orderSteps(const LoadedProgram &program);

// Arena layout: no persistent tensor shares bytes with anything; activations
// share bytes only when their live ranges are disjoint. The host arena is
// checked alike as an address space of its own. Needs the programs.
absl::Status checkArenaLayout(const plan::Plan &plan, const LoadedPlan &loaded);

} // namespace braid::plan_checks
