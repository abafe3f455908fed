#include "compiler/spec/SpecPipeline.h"

#include "passes/pipeline/Generators.h"

namespace braid {

pipeline::Family pipelineFamily(spec::PipelineSchedule schedule) {
  switch (schedule) {
  case spec::GPIPE:
    return pipeline::Family::kGPipe;
  case spec::INTERLEAVED:
    return pipeline::Family::kInterleaved;
  case spec::ZB_H1:
    return pipeline::Family::kZbH1;
  case spec::DUALPIPE_V:
    return pipeline::Family::kDualPipeV;
  default:
    return pipeline::Family::kOneFOneB;
  }
}

int64_t microBatchesPerRank(const spec::ModelSpec &spec) {
  return spec.train().global_batch_size() /
         (spec.train().micro_batch_size() * spec.parallel().data_parallel());
}

absl::StatusOr<pipeline::Schedule> specSchedule(const spec::ModelSpec &spec) {
  const spec::ParallelLayout &p = spec.parallel();
  return pipeline::makeSchedule(pipelineFamily(p.pipeline_schedule()),
                                p.pipeline_parallel(), p.virtual_stages(),
                                microBatchesPerRank(spec));
}

absl::StatusOr<pipeline::Partition>
specPartition(const spec::ModelSpec &spec, const pipeline::Placement &placement,
              const pipeline::PartitionCosts &costs) {
  return pipeline::makePartition(spec.model().num_layers(), placement,
                                 spec.parallel().pipeline_layout(), costs);
}

} // namespace braid
