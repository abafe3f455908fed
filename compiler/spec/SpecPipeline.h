// A spec's pipeline: its schedule family, its schedule and its partition,
// built from the parallel layout by the same code for the spec's checks
// and for the compiler's passes.
#pragma once

#include "absl/status/statusor.h"
#include "passes/pipeline/Partition.h"
#include "passes/pipeline/Schedule.h"
#include "spec.pb.h"

namespace braid {

pipeline::Family pipelineFamily(spec::PipelineSchedule schedule);

// Micro-batches per step on each data-parallel rank.
int64_t microBatchesPerRank(const spec::ModelSpec &spec);

// The schedule of `spec`'s parallel layout, or why it has none.
absl::StatusOr<pipeline::Schedule> specSchedule(const spec::ModelSpec &spec);

// The partition of `spec`'s layers over `placement`: its pipeline_layout,
// or the automatic one balanced by `costs`.
absl::StatusOr<pipeline::Partition>
specPartition(const spec::ModelSpec &spec, const pipeline::Placement &placement,
              const pipeline::PartitionCosts &costs);

} // namespace braid
