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

// One tensor of a checkpoint file and the plan tensor it stores, or the
// part of it: an MoE layer's experts are one plan tensor [E, ...] whose
// name holds `*`, stored as E tensors named with the expert's index in
// its place (Hugging Face's per-expert names).
struct StoredTensor {
  std::string name;
  // The shape in the file: the plan shape, its transpose, or an expert's
  // slice (the plan shape without dimension 0).
  std::vector<int64_t> shape;
  uint32_t planTensor = 0;
  bool transposed = false;
  // A second name of a tied parameter: written, but not read back.
  bool alias = false;
  // The bytes of the plan tensor stored: [offset, offset + bytes).
  uint64_t offset = 0, bytes = 0;
};

// model.safetensors: each parameter under its name, then under its tied
// alias when it has one; then each buffer (untrained state) under its name.
std::vector<StoredTensor> modelTensors(const LoadedPlan &plan);
// optimizer.safetensors: "<name>.exp_avg" and "<name>.exp_avg_sq".
std::vector<StoredTensor> optimizerTensors(const LoadedPlan &plan);

// The stored names of a plan tensor named `name` of `experts` experts
// (dimension 0): with `*` in the name, the name with 0 .. experts - 1 in
// its place; otherwise the name itself.
std::vector<std::string> expertNames(const std::string &name, int64_t experts);

// The index of the first NaN or infinity of `n` floats at `data` (which
// need not be aligned), or nullopt.
std::optional<int64_t> firstNonFinite(const void *data, int64_t n);

// Copies a row-major rows x cols matrix of floats into its transpose.
void transposeInto(const float *in, int64_t rows, int64_t cols, float *out);

} // namespace braid::ckpt
