#include "passes/PipelineAttrs.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dialects/braid/BraidDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace braid {

llvm::SmallVector<mlir::ModuleOp> rankModules(mlir::ModuleOp top) {
  llvm::SmallVector<mlir::ModuleOp> ranks(top.getOps<mlir::ModuleOp>());
  if (ranks.empty())
    ranks.push_back(top);
  return ranks;
}

namespace {

absl::Status malformed(llvm::StringRef attr, const std::string &why) {
  return absl::InvalidArgumentError(
      absl::StrCat("the module's ", attr.str(), " ", why));
}

int64_t intOf(DictionaryAttr d, llvm::StringRef key, int64_t otherwise) {
  auto value = d.getAs<IntegerAttr>(key);
  return value ? value.getInt() : otherwise;
}

// The settings of a module that must have a pipeline.
absl::StatusOr<PipelineSettings> requirePipeline(ModuleOp module) {
  absl::StatusOr<std::optional<PipelineSettings>> settings =
      readPipelineSettings(module);
  if (!settings.ok())
    return settings.status();
  if (!*settings)
    return absl::FailedPreconditionError(
        "the module has one pipeline stage (no braid.pipeline)");
  return **settings;
}

} // namespace

absl::StatusOr<std::optional<PipelineSettings>>
readPipelineSettings(ModuleOp module) {
  auto dict =
      module->getAttrOfType<DictionaryAttr>(BraidDialect::kPipelineAttr);
  if (!dict)
    return std::optional<PipelineSettings>();
  auto mesh = module->getAttrOfType<MeshAttr>(BraidDialect::kMeshAttr);
  if (!mesh)
    return malformed(BraidDialect::kPipelineAttr,
                     "needs braid.mesh beside it for the pipeline's size");
  PipelineSettings s;
  auto name = dict.getAs<StringAttr>("schedule");
  std::optional<pipeline::Family> family =
      name ? pipeline::familyNamed(name.str()) : std::nullopt;
  if (!family)
    return malformed(BraidDialect::kPipelineAttr,
                     "needs schedule = \"GPIPE\", \"ONE_F_ONE_B\", "
                     "\"INTERLEAVED\", \"ZB_H1\" or \"DUALPIPE_V\"");
  s.family = *family;
  s.virtualStages = intOf(dict, "virtual_stages", 1);
  if (auto layout = dict.getAs<StringAttr>("layout"))
    s.layout = layout.str();
  s.placement.ranks = mesh.getPp();
  const bool v = s.family == pipeline::Family::kDualPipeV;
  s.placement.chunks = v ? 2 : s.virtualStages;
  s.placement.vShape = v;
  if (s.placement.ranks < 1 || s.placement.chunks < 1)
    return malformed(BraidDialect::kPipelineAttr,
                     "needs pp and virtual_stages of 1 or more");
  return std::optional<PipelineSettings>(s);
}

void writePartition(ModuleOp module, const pipeline::Partition &p) {
  Builder b(module.getContext());
  SmallVector<Attribute> stages;
  for (const pipeline::StageLayers &s : p.stages) {
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("first", b.getI64IntegerAttr(s.first)),
        b.getNamedAttr("layers", b.getI64IntegerAttr(s.layers)),
        b.getNamedAttr("padding", b.getI64IntegerAttr(s.padding))};
    if (s.embedding)
      fields.push_back(b.getNamedAttr("embedding", b.getUnitAttr()));
    if (s.loss)
      fields.push_back(b.getNamedAttr("loss", b.getUnitAttr()));
    stages.push_back(b.getDictionaryAttr(fields));
  }
  module->setAttr(BraidDialect::kPartitionAttr, b.getArrayAttr(stages));
}

absl::StatusOr<pipeline::Partition> readPartition(ModuleOp module) {
  absl::StatusOr<PipelineSettings> settings = requirePipeline(module);
  if (!settings.ok())
    return settings.status();
  auto array = module->getAttrOfType<ArrayAttr>(BraidDialect::kPartitionAttr);
  if (!array)
    return malformed(BraidDialect::kPartitionAttr,
                     "is missing: run braid-partition first");
  pipeline::Partition p;
  p.placement = settings->placement;
  for (Attribute a : array) {
    auto d = dyn_cast<DictionaryAttr>(a);
    if (!d)
      return malformed(BraidDialect::kPartitionAttr,
                       "holds something other than a stage dictionary");
    pipeline::StageLayers s;
    s.first = intOf(d, "first", 0);
    s.layers = intOf(d, "layers", 0);
    s.padding = intOf(d, "padding", 0);
    s.embedding = d.get("embedding") != nullptr;
    s.loss = d.get("loss") != nullptr;
    p.stages.push_back(s);
  }
  if (static_cast<int64_t>(p.stages.size()) != p.placement.stages())
    return malformed(BraidDialect::kPartitionAttr,
                     absl::StrCat("has ", p.stages.size(),
                                  " stages, the pipeline ",
                                  p.placement.stages()));
  return p;
}

void writeSchedule(ModuleOp module, const pipeline::Schedule &s) {
  Builder b(module.getContext());
  SmallVector<Attribute> ranks;
  for (const std::vector<pipeline::Entry> &order : s.ranks)
    ranks.push_back(
        b.getStringAttr(pipeline::formatOrder(order, s.placement.chunks > 1)));
  module->setAttr(
      BraidDialect::kScheduleAttr,
      b.getDictionaryAttr(
          {b.getNamedAttr("micro_batches", b.getI64IntegerAttr(s.microBatches)),
           b.getNamedAttr("ranks", b.getArrayAttr(ranks))}));
}

absl::StatusOr<pipeline::Schedule> readSchedule(ModuleOp module) {
  absl::StatusOr<PipelineSettings> settings = requirePipeline(module);
  if (!settings.ok())
    return settings.status();
  auto dict =
      module->getAttrOfType<DictionaryAttr>(BraidDialect::kScheduleAttr);
  if (!dict)
    return malformed(BraidDialect::kScheduleAttr,
                     "is missing: run braid-schedule first");
  pipeline::Schedule s;
  s.family = settings->family;
  s.placement = settings->placement;
  s.microBatches = intOf(dict, "micro_batches", 0);
  auto ranks = dict.getAs<ArrayAttr>("ranks");
  if (!ranks || static_cast<int64_t>(ranks.size()) != s.placement.ranks)
    return malformed(BraidDialect::kScheduleAttr,
                     absl::StrCat("needs ranks = [...], one order per rank (",
                                  s.placement.ranks, ")"));
  for (auto [r, a] : llvm::enumerate(ranks)) {
    auto text = dyn_cast<StringAttr>(a);
    if (!text)
      return malformed(BraidDialect::kScheduleAttr,
                       absl::StrCat("rank ", r, ": not a string"));
    absl::StatusOr<std::vector<pipeline::Entry>> order =
        pipeline::parseOrder(text.str());
    if (!order.ok())
      return malformed(
          BraidDialect::kScheduleAttr,
          absl::StrCat("rank ", r, ": ", order.status().message()));
    s.ranks.push_back(std::move(*order));
  }
  return s;
}

pipeline::ModelShape modelShape(ModuleOp module) {
  pipeline::ModelShape shape;
  if (auto m = module->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr)) {
    shape.vocab = m.getVocabSize();
    shape.hidden = m.getHiddenSize();
    shape.ffn = m.getFfnHiddenSize();
    shape.heads = m.getNumHeads();
    shape.kvHeads = m.getNumKvHeads();
    shape.swiglu = m.getActivation() == Activation::SwiGLU;
  }
  if (auto t = module->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr)) {
    shape.seqLen = t.getSeqLen();
    shape.microBatch = t.getMicroBatchSize();
    shape.activationBytes = t.getPrecision() == Precision::BF16 ? 2 : 4;
  }
  return shape;
}

} // namespace braid
