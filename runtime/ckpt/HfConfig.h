// config.json: the Hugging Face configuration of a checkpoint's model,
// written as transformers' save_pretrained writes it (keys sorted, two-space
// indent) for LlamaForCausalLM (family llama) or GPT2LMHeadModel (gpt2), so
// that AutoModelForCausalLM.from_pretrained loads the checkpoint directory
// as it is and computes what Braid computes.
#pragma once

#include <string>

#include "runtime/plan/plan.pb.h"

namespace braid::ckpt {

// The config.json text of the model of `plan`, a plan the loader accepted
// (its ModelInfo is then complete and consistent). Every value is the
// plan's: the sizes, and the f32 values the kernels compute with (norm
// epsilon, RoPE base, dropout), each written as the shortest decimal that
// reads back as that f32 once a double is narrowed to it ("1e-05"), as
// PyTorch narrows it. The weights are fp32 ("torch_dtype": "float32"),
// whatever the plan's precision; the vocabulary has no special tokens
// (bos_token_id and eos_token_id are null).
std::string huggingFaceConfig(const plan::Plan &plan);

// `v` as Python's repr writes a float ("1e-05", "10000.0", "0.1") with the
// fewest digits that read back as the f32 `v`. Exposed for tests.
std::string shortestF32(float v);

} // namespace braid::ckpt
