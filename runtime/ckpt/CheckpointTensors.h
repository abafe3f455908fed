// The tensors a checkpoint holds for a plan, shared by the writer and the
// reader so that both agree on names, shapes and layout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/plan/PlanLoader.h"

namespace braid::ckpt {


// One tensor of a checkpoint file and the plan tensor it stores.
struct StoredTensor {
  std::string name;
  // The shape in the file: the plan shape, or its transpose.
  std::vector<int64_t> shape;
  uint32_t planTensor = 0;
  bool transposed = false;
  // A second name of a tied parameter: written, but not read back.
  bool alias = false;
};

// model.safetensors: each parameter under its name, then under its tied
// alias when it has one.
std::vector<StoredTensor> modelTensors(const LoadedPlan &plan);
// optimizer.safetensors: "<name>.exp_avg" and "<name>.exp_avg_sq".
std::vector<StoredTensor> optimizerTensors(const LoadedPlan &plan);

// The index of the first NaN or infinity of `n` floats at `data` (which
// need not be aligned), or nullopt.
std::optional<int64_t> firstNonFinite(const void *data, int64_t n);

// Copies a row-major rows x cols matrix of floats into its transpose.
void transposeInto(const float *in, int64_t rows, int64_t cols, float *out);

} // namespace braid::ckpt
