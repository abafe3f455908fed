// Small valid specs to edit, and helpers that load them and return the
// error text, for the spec tests.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "compiler/spec/SpecLoader.h"

namespace braid::test {

// A minimal Llama spec; the tests quote its line numbers.
inline constexpr std::string_view kLlama = R"(name: "t"
model {
  vocab_size: 256
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
  ffn_hidden_size: 172
  norm: RMS_NORM
  activation: SWIGLU
  position_embedding: ROPE
  naming: HF_LLAMA
}
train {
  micro_batch_size: 2
  seq_len: 16
  steps: 10
  adamw { lr: 1e-3 }
}
)";

// A minimal GPT-2 spec; the tests quote its line numbers.
inline constexpr std::string_view kGpt2 = R"(name: "g"
model {
  vocab_size: 256
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 256
  norm: LAYER_NORM
  activation: GELU
  position_embedding: LEARNED
  max_position_embeddings: 32
  tie_embeddings: true
  linear_bias: true
  naming: HF_GPT2
}
train {
  micro_batch_size: 2
  seq_len: 16
  steps: 10
  adamw { lr: 1e-3 }
}
)";

// `text` with its only occurrence of `from` replaced by `to`; fails the
// test when `from` does not occur exactly once.
inline std::string edit(std::string_view text, std::string_view from,
                        std::string_view to) {
  std::string out(text);
  size_t at = out.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in the spec";
  if (at == std::string::npos)
    return out;
  EXPECT_EQ(out.find(from, at + 1), std::string::npos)
      << "'" << from << "' occurs more than once";
  out.replace(at, from.size(), to);
  return out;
}

// The error message of loading `text` as "t.pbtxt"; "(loaded)" when it
// loads, so that a missing error shows up as a readable mismatch.
inline std::string errorOf(std::string_view text) {
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "t.pbtxt");
  if (spec.ok())
    return "(loaded)";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

// The repository root, where models/ and test/ live.
inline std::string sourcePath(std::string_view relative) {
  return std::string(BRAID_SOURCE_DIR) + "/" + std::string(relative);
}

} // namespace braid::test
