//===- PipelinePasses.cpp - braid-partition and braid-schedule -----------===//
#include "passes/Passes.h"

#include "passes/PipelineAttrs.h"
#include "passes/pipeline/CostModel.h"
#include "passes/pipeline/Generators.h"
#include "passes/pipeline/Simulate.h"

namespace braid {

#define GEN_PASS_DEF_PARTITIONPASS
#define GEN_PASS_DEF_SCHEDULEPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// The module's pipeline settings (nullopt: one stage), or failure after
// saying why.
FailureOr<std::optional<PipelineSettings>> settingsOf(ModuleOp module) {
  absl::StatusOr<std::optional<PipelineSettings>> settings =
      readPipelineSettings(module);
  if (!settings.ok()) {
    module.emitError(std::string(settings.status().message()));
    return failure();
  }
  return *settings;
}

struct PartitionPass : impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<PipelineSettings>> found = settingsOf(module);
    if (failed(found))
      return signalPassFailure();
    if (!*found)
      return;
    const PipelineSettings &settings = **found;
    auto model = module->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr);
    if (!model) {
      module.emitError("braid-partition needs the module's braid.model");
      return signalPassFailure();
    }
    absl::StatusOr<pipeline::Partition> partition = pipeline::makePartition(
        model.getNumLayers(), settings.placement, settings.layout,
        pipeline::partitionCosts(modelShape(module)));
    if (!partition.ok()) {
      module.emitError(std::string(partition.status().message()));
      return signalPassFailure();
    }
    writePartition(module, *partition);
  }
};

struct SchedulePass : impl::SchedulePassBase<SchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<PipelineSettings>> found = settingsOf(module);
    if (failed(found))
      return signalPassFailure();
    if (!*found)
      return;
    const PipelineSettings &settings = **found;
    if (!module->hasAttr(BraidDialect::kScheduleAttr)) {
      auto train = module->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
      if (!train) {
        module.emitError("braid-schedule needs the module's braid.train");
        return signalPassFailure();
      }
      absl::StatusOr<pipeline::Schedule> made = pipeline::makeSchedule(
          settings.family, settings.placement.ranks, settings.virtualStages,
          train.getNumMicroBatches());
      if (!made.ok()) {
        module.emitError(std::string(made.status().message()));
        return signalPassFailure();
      }
      writeSchedule(module, *made);
    }
    absl::StatusOr<pipeline::Schedule> schedule = readSchedule(module);
    absl::Status checked =
        schedule.ok() ? pipeline::checkSchedule(*schedule) : schedule.status();
    if (!checked.ok()) {
      module.emitError(std::string(checked.message()));
      return signalPassFailure();
    }
  }
};

} // namespace
} // namespace braid
