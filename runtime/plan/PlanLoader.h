// Loading and validating a plan.
//
// A plan arrives from a file the user names, so it is untrusted: loadPlan
// checks every field against the rules of docs/plan-format.md and refuses the
// plan with a sentence naming the offending field before any memory is
// allocated or any kernel runs. What it returns is the plan plus everything
// the executor and trainer need already resolved (kernel entries, tensor
// descriptors, kernel parameters), so nothing downstream
// re-parses or re-checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/registry/Kernel.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/plan.pb.h"

namespace braid {

// One instruction of a program, resolved.
struct LoadedInstruction {
  enum class Kind {
    kLaunch,
    kRecord,
    kWait,
    kStage,
    kReadback,
    kRepeat,
    kCollective,
    kSend,
    kRecv,
    kMark
  };
  Kind kind = Kind::kLaunch;
  uint32_t stream = 0;
  // kLaunch: the micro-batch the kernel computes; kStage: the micro-batch
  // whose staged values it copies; kMark: the micro-batch it brackets.
  int64_t microBatch = 0;
  // kStage: the INPUT tensor; kReadback: the SCALAR tensor; kSend / kRecv:
  // the tensor sent (also the one input) or received (the one output).
  uint32_t tensor = 0;
  // kReadback: the host slot.
  uint32_t slot = 0;
  // kRepeat: how many times the next `length` instructions run. Inside a
  // body, microBatch and slot are those of iteration 0.
  uint32_t count = 0;
  uint32_t length = 0;
  // kCollective: what it does and over which axis; it reads `inputs` and
  // writes `outputs` (an all-reduce's are its inputs, summed in place).
  plan::CollectiveKind collective = plan::COLLECTIVE_UNSPECIFIED;
  plan::MeshAxis axis = plan::AXIS_UNSPECIFIED;
  // SHIFT: how many places along the ring the tensors move.
  int32_t shiftOffset = 0;
  // kSend / kRecv: the peer along the PP axis, as an offset from this
  // rank's PP coordinate (modulo the PP size; never 0), and the channel
  // (0 activations, 1 gradients).
  int32_t peerOffset = 0;
  uint32_t channel = 0;
  // kLaunch: the kernel entry (owned by the registry), operand ids and the
  // parsed parameters. A launch on a host stream (LoadedPlan::hostStreams)
  // has the CPU kernel, whatever device the plan is loaded for.
  const KernelDef *kernel = nullptr;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  KernelParams params;
  // kRecord / kWait: the event and the value the record sets or the wait
  // waits for (plan.proto EventRecord, EventWait). The loader has checked
  // the timeline rules (StreamOrder.h checkEvents): a wait's record comes
  // earlier in program order, on the one stream that records the event.
  uint32_t event = 0;
  uint64_t value = 0;
  // kMark: which part of which stage's work begins (or, `end`, ends) here
  // (plan.proto Mark). The loader has checked that on each stream begins
  // and ends alternate, each end naming its begin's part, stage and
  // micro-batch.
  plan::SchedulePart part = plan::PART_UNSPECIFIED;
  uint32_t stage = 0;
  bool end = false;
};

struct LoadedProgram {
  std::string name;
  plan::ProgramKind kind = plan::PROGRAM_UNSPECIFIED;
  std::vector<LoadedInstruction> instructions;
};

// A validated plan. Holds pointers into the KernelRegistry it was loaded
// with, which must outlive it.
//
// A pipeline plan (mesh.pp above 1) is a header and one plan per pipeline
// rank: `stages[k]` is the effective plan of PP coordinate k
// (effectiveStagePlan in StagePlan.h: the stage plan with the header copied
// in), loaded and validated like any plan, and what that rank trains. The
// pipeline's own `proto` then holds the header only, and its other fields
// are empty.
struct LoadedPlan {
  plan::Plan proto;
  Device device = Device::kCPU;
  // descs[id]: shape and dtype of tensor `id`.
  std::vector<TensorDesc> descs;
  std::vector<LoadedProgram> programs;
  // Ids of the INPUT tensors by role. A whole plan has tokens and labels; a
  // stage plan has those its stages read (the first stage the tokens, the
  // loss stage the labels), possibly none.
  std::optional<uint32_t> tokens;
  std::optional<uint32_t> labels;
  std::optional<uint32_t> positions;
  // Ids of the PARAMETER tensors, in plan order.
  std::vector<uint32_t> parameters;
  // Ids of the BUFFER tensors (untrained model state), in plan order.
  std::vector<uint32_t> buffers;
  // Ids of the WEIGHT_COPY tensors, in plan order (BF16 plans; empty in FP32
  // plans). Each is the param.compute_copy of exactly one parameter.
  std::vector<uint32_t> weightCopies;
  // train.precision is BF16.
  bool bf16 = false;
  // hostStreams[s]: stream s is a host stream (plan.proto Plan.host_streams),
  // whose launches run on the host CPU with the CPU kernels over host
  // tensors; sized plan.num_streams.
  std::vector<bool> hostStreams;
  bool isHostStream(uint32_t stream) const {
    return stream < hostStreams.size() && hostStreams[stream];
  }
  // Whether a PARAMETER or OPTIMIZER_STATE tensor is a host tensor
  // (optimizer offload): the checkpointed tensors are then not all in the
  // arena.
  bool hostPersistent = false;

  // Where tensor `id` is in a host image of the plan's memory (what
  // checkpoints are written from and read into, and parameters initialised
  // in): the arena's bytes from 0, then the host arena's after them, so a
  // host tensor (plan.proto Tensor.host) is at memory.arena_bytes + its
  // offset. imageBytes() spans both.
  uint64_t imageOffset(uint32_t id) const {
    const plan::Tensor &t = proto.tensors(static_cast<int>(id));
    return t.host() ? proto.memory().arena_bytes() + t.offset() : t.offset();
  }
  uint64_t imageBytes() const {
    return proto.memory().arena_bytes() + proto.memory().host_bytes();
  }

  // The program of that kind; null when the plan has none (only INIT is
  // optional).
  const LoadedProgram *program(plan::ProgramKind kind) const;
  // The id of the tensor called `name`; nullopt when there is none.
  std::optional<uint32_t> findTensor(std::string_view name) const;

  absl::flat_hash_map<std::string, uint32_t> tensorsByName;

  // A pipeline plan's stages, by PP coordinate; empty for any other plan
  // (and in each stage).
  std::vector<LoadedPlan> stages;
  // The PP coordinate whose plan reads back the losses (the stage plan with
  // loss_readbacks: the rank holding the loss stage); 0 for a plan that is
  // no pipeline.
  int64_t lossStage = 0;
  bool pipeline() const { return !stages.empty(); }
};

// Parses a binary plan and validates it for `device` against the kernels of
// `registry`. Returns InvalidArgument with a sentence naming the first
// problem found (field path, tensor or instruction, and what to change).
// A pipeline plan is validated whole: its header, then every stage's
// effective plan against every rule (a problem in a stage is named as
// plan.stage_plans[k]...), then what the stages must agree on (each
// parameter in one stage, the losses read back by one, every send met by
// a receive of the same size).
absl::StatusOr<LoadedPlan>
loadPlan(std::string_view bytes, const KernelRegistry &registry, Device device);

// Reads the plan file at `path` (PlanFile.h: checksum and serialised plan)
// and loads it as loadSealedPlan does. A missing or unreadable file is
// NotFound / InvalidArgument naming the path.
absl::StatusOr<LoadedPlan> loadPlanFile(const std::string &path,
                                        const KernelRegistry &registry,
                                        Device device);

// Checks the header and checksum of plan-file bytes (unsealPlan), then
// calls loadPlan on the plan inside. Every message starts with `origin`
// ("the plan file 'x.plan'").
absl::StatusOr<LoadedPlan> loadSealedPlan(std::string_view bytes,
                                          const std::string &origin,
                                          PlanSource source,
                                          const KernelRegistry &registry,
                                          Device device);

// "f32", "bf16", "i32" for a plan dtype; "unspecified" otherwise.
std::string planDTypeName(plan::DType dtype);
// "PARAMETER", "ACTIVATION", ... for a tensor kind; "UNSPECIFIED" otherwise.
std::string tensorKindName(plan::TensorKind kind);
// "TOKENS", "LABELS", "POSITIONS" for an input role; "UNSPECIFIED" otherwise.
std::string inputRoleName(plan::InputRole role);
// "cosine", "constant" for an LR decay; "unspecified" otherwise. These are
// the words checkpoints record (RunIdentity.h).
std::string lrDecayName(plan::TrainConfig::LrDecay decay);
// "fp32", "bf16" for a precision; "unspecified" otherwise.
std::string precisionName(plan::TrainConfig::Precision precision);
// "tp", "dp", "edp", ... for a mesh axis ("axis_unspecified" for 0):
// how messages name an axis.
std::string planAxisName(plan::MeshAxis axis);

} // namespace braid
