#include "runtime/ckpt/HfConfig.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/Json.h"

namespace braid::ckpt {
namespace {

// One member of config.json: its key and its value as JSON text.
using Member = std::pair<std::string, std::string>;

// As json.dumps(config, indent=2, sort_keys=True) writes it, and a newline.
std::string render(std::vector<Member> members) {
  std::sort(members.begin(), members.end());
  std::string text = "{\n";
  for (size_t i = 0; i < members.size(); ++i)
    absl::StrAppend(&text, "  ", jsonQuote(members[i].first), ": ",
                    members[i].second, i + 1 < members.size() ? ",\n" : "\n");
  return text + "}\n";
}

std::string str(std::string_view s) { return jsonQuote(s); }
std::string num(int64_t v) { return absl::StrCat(v); }
std::string flag(bool v) { return v ? "true" : "false"; }
std::string f32(double v) { return shortestF32(static_cast<float>(v)); }
std::string list(std::string_view only) {
  return absl::StrCat("[\n    ", jsonQuote(only), "\n  ]");
}
const std::string kNull = "null";

std::vector<Member> llamaConfig(const plan::ModelInfo &m) {
  return {
      {"architectures", list("LlamaForCausalLM")},
      {"attention_bias", flag(m.linear_bias())},
      {"attention_dropout", f32(m.attention_dropout())},
      {"bos_token_id", kNull},
      {"eos_token_id", kNull},
      {"head_dim", num(m.head_dim())},
      {"hidden_act", str("silu")},
      {"hidden_size", num(m.hidden_size())},
      {"intermediate_size", num(m.ffn_hidden_size())},
      {"max_position_embeddings", num(m.max_position_embeddings())},
      {"mlp_bias", flag(m.linear_bias())},
      {"model_type", str("llama")},
      {"num_attention_heads", num(m.num_heads())},
      {"num_hidden_layers", num(m.num_layers())},
      {"num_key_value_heads", num(m.num_kv_heads())},
      {"pretraining_tp", num(1)},
      {"rms_norm_eps", f32(m.norm_eps())},
      {"rope_scaling", kNull},
      {"rope_theta", f32(m.rope_theta())},
      {"tie_word_embeddings", flag(m.tie_embeddings())},
      {"torch_dtype", str("float32")},
      {"use_cache", flag(true)},
      {"vocab_size", num(m.vocab_size())},
  };
}

std::vector<Member> gpt2Config(const plan::ModelInfo &m) {
  // GPT-2 applies resid_pdrop to both residual branches and embd_pdrop
  // after the embeddings: Braid's hidden dropout is both.
  return {
      {"activation_function", str("gelu_new")},
      {"architectures", list("GPT2LMHeadModel")},
      {"attn_pdrop", f32(m.attention_dropout())},
      {"bos_token_id", kNull},
      {"embd_pdrop", f32(m.hidden_dropout())},
      {"eos_token_id", kNull},
      {"layer_norm_epsilon", f32(m.norm_eps())},
      {"model_type", str("gpt2")},
      {"n_ctx", num(m.max_position_embeddings())},
      {"n_embd", num(m.hidden_size())},
      {"n_head", num(m.num_heads())},
      {"n_inner", num(m.ffn_hidden_size())},
      {"n_layer", num(m.num_layers())},
      {"n_positions", num(m.max_position_embeddings())},
      {"reorder_and_upcast_attn", flag(false)},
      {"resid_pdrop", f32(m.hidden_dropout())},
      {"scale_attn_by_inverse_layer_idx", flag(false)},
      {"scale_attn_weights", flag(true)},
      {"tie_word_embeddings", flag(m.tie_embeddings())},
      {"torch_dtype", str("float32")},
      {"use_cache", flag(true)},
      {"vocab_size", num(m.vocab_size())},
  };
}

} // namespace

std::string shortestF32(float v) {
  if (!std::isfinite(v))
    return kNull; // the loader admits none; JSON has no NaN
  if (v == 0)
    return std::signbit(v) ? "-0.0" : "0.0";
  // The fewest significant digits whose double narrows back to v; nine
  // always do.
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, static_cast<double>(v));
    if (static_cast<float>(std::strtod(buf, nullptr)) == v)
      break;
  }
  std::string text(buf);
  const bool negative = text[0] == '-';
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (char c : text.substr(negative ? 1 : 0, e - (negative ? 1 : 0)))
    if (c != '.')
      digits += c;
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  // Python's repr: positional for exponents -4..15, scientific otherwise.
  std::string out;
  if (exponent >= 16 || exponent < -4) {
    out = digits.substr(0, 1);
    if (digits.size() > 1)
      absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+',
                                          std::abs(exponent)));
  } else if (exponent >= 0) {
    const size_t whole = static_cast<size_t>(exponent) + 1;
    if (digits.size() < whole)
      digits.append(whole - digits.size(), '0');
    out = absl::StrCat(digits.substr(0, whole), ".",
                       digits.size() > whole ? digits.substr(whole) : "0");
  } else {
    out = absl::StrCat("0.", std::string(-exponent - 1, '0'), digits);
  }
  return negative ? "-" + out : out;
}

std::string huggingFaceConfig(const plan::Plan &plan) {
  const plan::ModelInfo &m = plan.model();
  return render(m.family() == "gpt2" ? gpt2Config(m) : llamaConfig(m));
}

} // namespace braid::ckpt
