// Rules of the `compile` block: the fusion list, the recompute policy,
// the memory budget and the offload targets.
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "compiler/spec/RuleChecks.h"
#include "compiler/spec/FusionList.h"
#include "compiler/spec/OffloadTargets.h"
#include "compiler/spec/RecomputePolicy.h"
#include "compiler/spec/SpecPipeline.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {

void validateCompile(const spec::Compile &compile, RuleSink &sink) {
  absl::StatusOr<std::vector<RecomputePolicy>> recompute =
      parseRecomputeStages(compile.recompute());
  if (!recompute.ok())
    sink.report("compile.recompute",
                std::string(recompute.status().message()));
  // In GiB; a budget in bytes must fit the arena's 2^62-byte range.
  const double budget = compile.memory_budget_gb();
  if (checkFloat(budget, FloatRange::kNonNegative, "compile.memory_budget_gb",
                 "give the device memory of one rank in GiB, e.g. 80, or 0 "
                 "for no budget",
                 sink) &&
      budget > double(int64_t{1} << 32))
    sink.report("compile.memory_budget_gb",
                absl::StrCat(formatFloat(budget),
                             " GiB is beyond the 2^32 GiB an arena can "
                             "address; give the device memory of one rank"));
  if (recompute.ok() && recompute->size() == 1 &&
      recompute->front().kind == RecomputePolicy::Kind::kAuto &&
      !(budget > 0))
    sink.report("compile.recompute",
                "auto chooses under a memory budget; set "
                "compile.memory_budget_gb (GiB per rank), e.g. "
                "memory_budget_gb: 80");
  // The syntax alone: whether its layers and stages exist needs the model
  // and the layout valid (validateOffloadTargets).
  if (absl::StatusOr<OffloadTargets> offload =
          parseOffloadTargets(compile.offload());
      !offload.ok())
    sink.report("compile.offload", std::string(offload.status().message()));
  // Unset (empty) means no fusion; anything written must parse.
  if (absl::StripAsciiWhitespace(compile.fusion()).empty())
    return;
  absl::StatusOr<std::vector<std::string>> names =
      parseFusionNames(compile.fusion());
  if (!names.ok())
    sink.report("compile.fusion", std::string(names.status().message()));
}

absl::Status checkOffload(const spec::ModelSpec &spec) {
  absl::StatusOr<OffloadTargets> targets =
      parseOffloadTargets(spec.compile().offload());
  if (!targets.ok())
    return targets.status();
  // ZeRO keeps one data-parallel shard of each master and moment and
  // gathers the weights after AdamW on the device; the host optimizer
  // updates whole (or tensor-parallel) tensors.
  if (targets->optimizer && spec.parallel().zero_stage() > 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer offload does not combine with parallel.zero_stage ",
        spec.parallel().zero_stage(),
        ": ZeRO shards the optimizer state over the data-parallel ranks on "
        "the device, optimizer offload keeps it whole on the host; choose "
        "one (zero_stage: 0 to offload)"));
  // "activations" names every layer there is; only numbers can miss.
  if (targets->layers.empty() && targets->stages.empty())
    return absl::OkStatus();
  // Stages are numbered as the partition numbers them: in model order,
  // one per rank and chunk (interleaved's virtual stages, DualPipeV's two
  // per rank), so the count is the schedule's placement's.
  absl::StatusOr<pipeline::Schedule> schedule = specSchedule(spec);
  if (!schedule.ok())
    return absl::OkStatus(); // parallel.pipeline_schedule says why
  const pipeline::Placement &placement = schedule->placement;
  return checkOffloadTargetsExist(*targets, spec.model().num_layers(),
                                  placement.stages(), placement.ranks);
}

void validateOffloadTargets(const spec::ModelSpec &spec, RuleSink &sink) {
  if (absl::Status s = checkOffload(spec); !s.ok())
    sink.report("compile.offload", std::string(s.message()));
}

} // namespace braid
