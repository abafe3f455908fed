// A small trainable plan made of the real CPU kernels: token embedding,
// RMSNorm and an LM head trained with cross-entropy and AdamW. Small enough
// for unit tests (a few milliseconds per step), real enough that its loss
// falls on tinyshakespeare.
#pragma once

#include <string>

#include "runtime/plan/plan.pb.h"

namespace braid::test {

struct TinyModelOptions {
  int64_t microBatchSize = 2;
  int64_t numMicroBatches = 2;
  int64_t seqLen = 8;
  int64_t hidden = 16;
  int64_t steps = 6;
  // Run the weight-gradient kernels on stream 1, joined by events.
  bool twoStreams = false;
  // State one micro-batch once, in a Repeat over the step's micro-batches
  // (one stream only), instead of every micro-batch in turn.
  bool repeated = false;
  // Store the LM head transposed in checkpoints (GPT-2 Conv1D style).
  bool transposedHead = false;
  // Also save the embedding under this name (tied weights).
  std::string embeddingAlias;
  bool positions = false;
  // A BF16 plan (train.precision "bf16") in which the embedding and the LM
  // head get bf16 WEIGHT_COPY tensors ("<name>.bf16"), cast from the
  // masters by an "init" program and again after each AdamW step. Compute
  // still reads the f32 masters, so the losses equal the FP32 plan's.
  bool weightCopies = false;
};

plan::Plan tinyModelPlan(const TinyModelOptions &options = {});

} // namespace braid::test
