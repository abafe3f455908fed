//===- Marks.cpp - layer and phase marks ----------------------------------===//
#include "dialects/braid/Marks.h"

#include <string>

using namespace mlir;

namespace braid {

LayerAttr layerMark(Operation *op) {
  return op->getAttrOfType<LayerAttr>(BraidDialect::kLayerMark);
}

std::optional<Phase> phaseMark(Operation *op) {
  if (auto p = op->getAttrOfType<PhaseAttr>(BraidDialect::kPhaseMark))
    return p.getValue();
  return std::nullopt;
}

bool isBackwardPhase(Operation *op) {
  std::optional<Phase> phase = phaseMark(op);
  return phase == Phase::InputGrad || phase == Phase::WeightGrad;
}

bool isOptimizerPhase(Operation *op) {
  return phaseMark(op) == Phase::Optimizer;
}

void setLayerMark(Operation *op, LayerAttr layer) {
  op->setAttr(BraidDialect::kLayerMark, layer);
}

void setPhaseMark(Operation *op, Phase phase) {
  op->setAttr(BraidDialect::kPhaseMark,
              PhaseAttr::get(op->getContext(), phase));
}

bool moeBlockMark(Operation *op) {
  return op->hasAttr(BraidDialect::kMoeBlockMark);
}

void setMoeBlockMark(Operation *op) {
  op->setAttr(BraidDialect::kMoeBlockMark, UnitAttr::get(op->getContext()));
}

void copyMarks(Operation *from, Operation *to) {
  if (LayerAttr layer = layerMark(from))
    setLayerMark(to, layer);
  if (std::optional<Phase> phase = phaseMark(from))
    setPhaseMark(to, *phase);
  if (moeBlockMark(from))
    setMoeBlockMark(to);
}

std::string describeLayer(LayerAttr layer) {
  if (layer.isEmbedding())
    return "embedding";
  if (layer.isLoss())
    return "loss";
  return "layer " + std::to_string(layer.getIndex());
}

} // namespace braid
