// Sizes derived from a spec, computed without overflow.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/spec/spec.pb.h"

namespace braid {

// The number of trainable parameters of `model`, counted the way Hugging
// Face counts them (tied embeddings once): Llama 3 8B has 8,030,261,248;
// MoE layers count every expert, the router and the shared experts.
// `model` must be validated (loadSpecText does so): InvalidArgument for
// non-positive sizes, OutOfRange if the count overflows int64.
absl::StatusOr<int64_t> parameterCount(const spec::Architecture &model);

// The tokens of one micro-batch on one rank, T = micro_batch_size x
// seq_len / context_parallel: what an MoE layer routes at once.
double moeTokensPerMicroBatch(const spec::ModelSpec &spec);
// The sub-units of each MoE layer (parallel.ep_sub_units; 1 without
// expert parallel), and the tokens of each, T / sub-units: the dropless
// bound and adaptive recompute's rows are each sub-unit's.
int64_t moeSubUnits(const spec::ModelSpec &spec);
double moeUnitTokens(const spec::ModelSpec &spec);

// The rows each expert takes in capacity mode, floor(capacity_factor x T
// x top_k / num_experts) (docs/moe.md); 0 for dropless or a dense model.
int64_t moeCapacity(const spec::ModelSpec &spec);
// Under expert parallel (dropless), the token rows one rank's experts may
// receive in a micro-batch, which the plan holds room for (docs/moe.md):
// dropless_bound x T x top_k (the mean, T a rank's tokens of a
// micro-batch, or of one sub-unit of it: moeUnitTokens), rounded up, and at
// most the worst case, EP x T x min(top_k, num_experts / EP) (every rank's
// tokens choosing this rank's experts), which dropless_bound 0 asks for. 0
// without expert parallel.
int64_t moeDroplessBound(const spec::ModelSpec &spec);

// The rows of a micro-batch's gate and up activations an EP rank keeps for
// the backward under adaptive recompute: ceil(adaptive_recompute x T x
// top_k), T as above (a sub-unit's). 0 when it is off, or without a
// dropless bound.
int64_t moeAdaptiveRows(const spec::ModelSpec &spec);

// Hot-expert replication's slots per MoE layer (model.moe.hot_experts) and
// the rows a rank's hot experts may take in a micro-batch: T x min(top_k,
// slots), each token choosing an expert at most once. 0 when it is off or
// without a dropless bound.
int64_t moeHotSlots(const spec::ModelSpec &spec);
int64_t moeHotRows(const spec::ModelSpec &spec);
// The busiest rank's load over the mean above which replication is on
// (model.moe.replication_threshold, 1.25 when unset).
double moeReplicationThreshold(const spec::ModelSpec &spec);

} // namespace braid
