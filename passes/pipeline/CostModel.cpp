#include "passes/pipeline/CostModel.h"

namespace braid::pipeline {
namespace {

struct LayerFlops {
  double matmul = 0;    // forward, per token
  double attention = 0; // forward scores and weighted sum, per token
};

LayerFlops layerFlops(const ModelShape &m) {
  const double d = static_cast<double>(m.hidden);
  const double kv =
      d / static_cast<double>(m.heads) * static_cast<double>(m.kvHeads);
  const double attnWeights = 2 * d * d + 2 * d * kv;
  const double mlpWeights =
      (m.swiglu ? 3.0 : 2.0) * d * static_cast<double>(m.ffn);
  return {2 * (attnWeights + mlpWeights),
          4 * static_cast<double>(m.seqLen) * d};
}

} // namespace

PartitionCosts partitionCosts(const ModelShape &shape) {
  const LayerFlops layer = layerFlops(shape);
  return {layer.matmul + layer.attention, 0,
          2.0 * static_cast<double>(shape.hidden) *
              static_cast<double>(shape.vocab)};
}

CostModel costModel(const ModelShape &shape, const Partition &partition,
                    const Rates &rates) {
  const double tokens = static_cast<double>(shape.seqLen * shape.microBatch);
  const LayerFlops layer = layerFlops(shape);
  const double head = 2.0 * static_cast<double>(shape.hidden) *
                      static_cast<double>(shape.vocab);
  const double d = static_cast<double>(shape.hidden);
  const double layerActivations =
      tokens *
      (34 * d + 5 * static_cast<double>(shape.heads) *
                    static_cast<double>(shape.seqLen)) *
      static_cast<double>(shape.activationBytes) / 2;
  const double perFlop = tokens / rates.flopsPerSecond;
  CostModel model;
  for (const StageLayers &s : partition.stages) {
    const double n = static_cast<double>(s.layers);
    StageCosts c;
    c.f =
        perFlop * (n * (layer.matmul + layer.attention) + (s.loss ? head : 0));
    c.b = perFlop *
          (n * (layer.matmul + 2 * layer.attention) + (s.loss ? head : 0));
    c.w = perFlop * (n * layer.matmul + (s.loss ? head : 0));
    c.activationBytes = n * layerActivations;
    model.stages.push_back(c);
  }
  const double boundaryBytes =
      tokens * d * static_cast<double>(shape.activationBytes);
  model.transfer = rates.linkLatency + boundaryBytes / rates.linkBytesPerSecond;
  return model;
}

} // namespace braid::pipeline
