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

// The settings, or null after the error (a module without a pipeline has
// no settings and no error).
std::optional<PipelineSettings> settingsOrFail(Pass &pass, ModuleOp module,
                                               bool &failed) {
  absl::StatusOr<std::optional<PipelineSettings>> settings =
      readPipelineSettings(module);
  failed = !settings.ok();
  if (failed) {
    module.emitError(std::string(settings.status().message()));
    return std::nullopt;
  }
  return *settings;
}

struct PartitionPass : impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool failed = false;
    std::optional<PipelineSettings> settings =
        settingsOrFail(*this, module, failed);
    if (failed)
      return signalPassFailure();
    if (!settings)
      return;
    auto model = module->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr);
    if (!model) {
      module.emitError("braid-partition needs the module's braid.model");
      return signalPassFailure();
    }
    const int64_t layers = model.getNumLayers();
    absl::StatusOr<pipeline::Partition> partition =
        settings->layout.empty()
            ? pipeline::partitionLayers(
                  layers, settings->placement,
                  pipeline::partitionCosts(modelShape(module)))
            : pipeline::parseLayout(settings->layout, layers,
                                    settings->placement);
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
    bool failed = false;
    std::optional<PipelineSettings> settings =
        settingsOrFail(*this, module, failed);
    if (failed)
      return signalPassFailure();
    if (!settings)
      return;
    if (!module->hasAttr(BraidDialect::kScheduleAttr)) {
      auto train = module->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
      if (!train) {
        module.emitError("braid-schedule needs the module's braid.train");
        return signalPassFailure();
      }
      absl::StatusOr<pipeline::Schedule> made = pipeline::makeSchedule(
          settings->family, settings->placement.ranks, settings->virtualStages,
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
