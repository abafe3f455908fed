// A small trainable plan made of the real CPU kernels: token embedding,
// RMSNorm and an LM head trained with cross-entropy and AdamW. Small enough
// for unit tests (a few milliseconds per step), real enough that its loss
// falls on tinyshakespeare.
#pragma once

#include <cstdint>
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
  // Optimizer offload (plan.proto Tensor.host, Plan.host_streams): the
  // parameters and their moments are host tensors; compute reads f32
  // WEIGHT_COPY tensors ("<name>.copy") on the device, which "init" copies
  // from the masters. After the backward the copy stream (2) copies each
  // gradient, the norm and the skipped flag to host transients, AdamW runs
  // on host stream 3 over them, and the copy stream copies each updated
  // master to its weight copy, events ordering it all. The same numbers as
  // the plan without offload, bit for bit.
  bool optimizerOffload = false;
};

// The streams of optimizer offload (TinyModelOptions::optimizerOffload).
constexpr uint32_t kTinyCopyStream = 2;
constexpr uint32_t kTinyHostStream = 3;

plan::Plan tinyModelPlan(const TinyModelOptions &options = {});

} // namespace braid::test
