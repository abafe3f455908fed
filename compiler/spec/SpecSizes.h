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

// The rows each expert takes in capacity mode, floor(capacity_factor x T
// x top_k / num_experts) (docs/moe.md); 0 for dropless or a dense model.
int64_t moeCapacity(const spec::ModelSpec &spec);

} // namespace braid
