// The tiny model (TinyModelPlan.h) cut into a two-rank pipeline: rank 0
// holds the token embedding, rank 1 the RMSNorm, the LM head and the loss.
// Rank 0 sends each micro-batch's embeddings to rank 1 (channel 0), rank 1
// sends their gradient back (channel 1). Each rank takes its part of the
// gradient norm, gathers the parts over PP and sums the loss over PP, so
// both apply the single-rank plan's update (to rounding in the norm).
// Parameters keep their names, so checkpoints are the single-rank plan's.
#pragma once

#include <cstdint>

#include "runtime/plan/plan.pb.h"
#include "test/unit/runtime/TinyModelPlan.h"

namespace braid::test {

struct TinyPipelineOptions {
  // Sizes and steps; numMicroBatches is each data-parallel rank's.
  TinyModelOptions model;
  // Data-parallel replicas of the pipeline (mesh.dp): gradients and the
  // loss sum are also summed over DP.
  int64_t dataParallel = 1;
  // Everything on stream 0, each micro-batch's forward and backward in
  // turn. Otherwise a GPipe order (every forward, then every backward) with
  // the transfers on two communication streams ordered by events: sends on
  // one, receives on the other.
  bool oneStream = false;
};

// The pipeline plan (outer plan and two stage plans).
plan::Plan tinyPipelinePlan(const TinyPipelineOptions &options = {});

} // namespace braid::test
