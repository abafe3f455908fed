// The simulator's cost model from the model's shape: forward, input- and
// weight-gradient FLOPs of each stage, turned into time by a calibrated
// rate, and the activations each micro-batch keeps on its stage until its
// backward is done.
#pragma once

#include <cstdint>

#include "passes/pipeline/Partition.h"
#include "passes/pipeline/Simulate.h"

namespace braid::pipeline {

struct ModelShape {
  int64_t vocab = 0, hidden = 0, ffn = 0;
  int64_t heads = 1, kvHeads = 1;
  bool swiglu = true;
  int64_t seqLen = 0, microBatch = 1;
  int64_t activationBytes = 4; // per element: 4 (fp32) or 2 (bf16)
};

struct Rates {
  double flopsPerSecond = 1e11; // sustained matmul rate of one rank
  double linkLatency = 25e-6;   // seconds per transfer
  double linkBytesPerSecond = 2e9;
};

// Forward FLOPs per token: of one transformer layer (its matmuls and the
// attention scores), of the embedding (none: a gather) and of the loss
// (the LM head). The partition balances with these.
PartitionCosts partitionCosts(const ModelShape &shape);

// Per stage: F, B and W in seconds, the activations a micro-batch holds,
// and the time of one boundary transfer (a micro-batch's hidden states).
//   F: 2 flops per weight per token, plus the attention's 4 s d per token.
//   B: the matmuls' input gradients (as many flops as their forward) and
//      the attention's backward (twice its forward).
//   W: the matmuls' weight gradients (as many flops as their forward).
//   Activations per layer per token: 34 d + 5 a s elements' worth of
//   bytes at 2 bytes (the usual estimate for a transformer layer without
//   recompute), scaled to the activation width.
CostModel costModel(const ModelShape &shape, const Partition &partition,
                    const Rates &rates);

} // namespace braid::pipeline
