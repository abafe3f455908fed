#include "runtime/ckpt/CheckpointTensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace braid::ckpt {

std::vector<std::string> expertNames(const std::string &name, int64_t experts) {
  const size_t star = name.find('*');
  if (star == std::string::npos)
    return {name};
  std::vector<std::string> out;
  for (int64_t e = 0; e < experts; ++e)
    out.push_back(name.substr(0, star) + std::to_string(e) +
                  name.substr(star + 1));
  return out;
}

namespace {

// `stored` (named as the plan tensor, shaped as the file holds it) once,
// or once per expert of a stacked tensor.
void addStored(std::vector<StoredTensor> &out, StoredTensor stored,
               const plan::Tensor &t) {
  stored.bytes = t.size_bytes();
  if (stored.name.find('*') == std::string::npos || t.shape_size() == 0) {
    out.push_back(std::move(stored));
    return;
  }
  const std::vector<std::string> names = expertNames(stored.name, t.shape(0));
  const uint64_t slice = names.empty() ? 0 : stored.bytes / names.size();
  stored.shape.erase(stored.shape.begin());
  for (size_t e = 0; e < names.size(); ++e) {
    StoredTensor part = stored;
    part.name = names[e];
    part.offset = e * slice;
    part.bytes = slice;
    out.push_back(std::move(part));
  }
}

} // namespace

std::vector<StoredTensor> modelTensors(const LoadedPlan &plan) {
  std::vector<StoredTensor> out;
  for (uint32_t id : plan.parameters) {
    const plan::Tensor &t = plan.proto.tensors(id);
    StoredTensor stored;
    stored.name = t.name();
    stored.shape.assign(t.shape().begin(), t.shape().end());
    stored.planTensor = id;
    stored.transposed = t.param().checkpoint_transposed();
    if (stored.transposed)
      std::swap(stored.shape[0], stored.shape[1]);
    addStored(out, stored, t);
    if (!t.param().tied_alias().empty()) {
      stored.name = t.param().tied_alias();
      stored.alias = true;
      addStored(out, std::move(stored), t);
    }
  }
  for (uint32_t id : plan.buffers) {
    const plan::Tensor &t = plan.proto.tensors(id);
    StoredTensor stored;
    stored.name = t.name();
    stored.shape.assign(t.shape().begin(), t.shape().end());
    stored.planTensor = id;
    addStored(out, std::move(stored), t);
  }
  return out;
}

std::vector<StoredTensor> optimizerTensors(const LoadedPlan &plan) {
  std::vector<StoredTensor> out;
  for (uint32_t id : plan.parameters) {
    const plan::Tensor &t = plan.proto.tensors(id);
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    StoredTensor m{t.name() + ".exp_avg", shape, t.param().exp_avg()};
    StoredTensor v{t.name() + ".exp_avg_sq", shape, t.param().exp_avg_sq()};
    addStored(out, std::move(m), plan.proto.tensors(t.param().exp_avg()));
    addStored(out, std::move(v), plan.proto.tensors(t.param().exp_avg_sq()));
  }
  return out;
}

void transposeInto(const float *in, int64_t rows, int64_t cols, float *out) {
  // Blocked so that both sides stay in cache for large matrices.
  constexpr int64_t kBlock = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock)
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c)
          out[c * rows + r] = in[r * cols + c];
}

std::optional<int64_t> firstNonFinite(const void *data, int64_t n) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, bytes + i * sizeof(float), sizeof v);
    if (!std::isfinite(v))
      return i;
  }
  return std::nullopt;
}

} // namespace braid::ckpt
