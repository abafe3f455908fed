// Sizes derived from a spec, computed without overflow.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/spec/spec.pb.h"

namespace braid {

// The number of trainable parameters of `model`, counted the way Hugging
// Face counts them (tied embeddings once): Llama 3 8B has 8,030,261,248.
// `model` must be validated (loadSpecText does so): InvalidArgument for
// non-positive sizes, OutOfRange if the count overflows int64.
absl::StatusOr<int64_t> parameterCount(const spec::Architecture &model);

} // namespace braid
