// The validation rules of a spec. docs/spec-reference.md lists each rule
// with its message; test/unit/spec covers each one.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/spec/RuleChecks.h"
#include "compiler/spec/spec.pb.h"

namespace braid {

// Checks a spec whose defaults were filled (fillSpecDefaults) and reports
// every rule it breaks, each with the path of the field to change. Rules
// that depend on a field already reported are skipped, so each mistake is
// reported once.
void validateSpec(const spec::ModelSpec &spec, RuleSink &sink);

// The parts of validateSpec, one per file.

// ArchitectureRules.cpp: sizes, choices and their combinations in `model`.
void validateArchitecture(const spec::Architecture &model, RuleSink &sink);

// TrainingRules.cpp: batch, sequence, optimizer, schedule, dropout and
// precision.
void validateTraining(const spec::Training &train, RuleSink &sink);

// model.moe and parallel.expert_parallel (MoeRules.cpp).
void validateMoe(const spec::ModelSpec &spec, RuleSink &sink);

// CompileRules.cpp: the `compile` settings (the fusion list, the recompute
// policy, the memory budget, the offload targets' syntax).
void validateCompile(const spec::Compile &compile, RuleSink &sink);

// CompileRules.cpp: compile.offload against the model and its pipeline
// layout: the targets parse and every layer and stage they name exists.
// Assumes the other rules passed (it needs num_layers and the schedule's
// stages).
void validateOffloadTargets(const spec::ModelSpec &spec, RuleSink &sink);

// validateOffloadTargets' rule as a status, its message without the field
// path: braidc checks --offload's value with it once set in the loaded
// spec.
absl::Status checkOffload(const spec::ModelSpec &spec);

// SpecSizes.cpp: sizes whose products overflow 64-bit integers. Assumes the
// other rules passed.
void validateSizes(const spec::ModelSpec &spec, RuleSink &sink);

} // namespace braid
