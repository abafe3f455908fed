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

// Mixtral's config: Llama's, with the experts' (MixtralForCausalLM has no
// attention or MLP biases, no head_dim or pretraining_tp setting).
std::vector<Member> mixtralConfig(const plan::ModelInfo &m) {
  const plan::MoeInfo &moe = m.moe();
  std::vector<Member> out;
  for (Member &member : llamaConfig(m))
    if (member.first != "attention_bias" && member.first != "mlp_bias" &&
        member.first != "pretraining_tp" && member.first != "head_dim")
      out.push_back(std::move(member));
  for (Member &member : out) {
    if (member.first == "architectures")
      member.second = list("MixtralForCausalLM");
    else if (member.first == "model_type")
      member.second = str("mixtral");
    else if (member.first == "intermediate_size")
      member.second = num(moe.expert_ffn_hidden_size());
  }
  out.push_back({"num_local_experts", num(moe.num_experts())});
  out.push_back({"num_experts_per_tok", num(moe.top_k())});
  out.push_back({"output_router_logits", flag(false)});
  out.push_back({"router_aux_loss_coef", f32(moe.aux_loss_coeff())});
  out.push_back({"router_jitter_noise", f32(0.0)});
  out.push_back({"sliding_window", kNull});
  return out;
}

// DeepSeek-V3's MoE settings (its config.json keys) beside Llama's
// attention: transformers has no class for that pair (DeepSeek-V3's
// attention is multi-head latent attention, which Braid does not build),
// so this config describes the checkpoint without naming a loadable
// architecture.
std::vector<Member> deepseekConfig(const plan::ModelInfo &m) {
  const plan::MoeInfo &moe = m.moe();
  std::vector<Member> out = llamaConfig(m);
  for (Member &member : out)
    if (member.first == "architectures")
      member.second = list("LlamaWithDeepseekV3MoE");
  out.push_back({"n_routed_experts", num(moe.num_experts())});
  out.push_back({"num_experts_per_tok", num(moe.top_k())});
  out.push_back({"moe_intermediate_size", num(moe.expert_ffn_hidden_size())});
  out.push_back({"n_shared_experts", num(moe.num_shared_experts())});
  out.push_back({"first_k_dense_replace", num(moe.first_k_dense())});
  out.push_back({"scoring_func", str(moe.sigmoid() ? "sigmoid" : "softmax")});
  out.push_back({"norm_topk_prob", flag(moe.normalize_top_k())});
  out.push_back({"routed_scaling_factor", f32(moe.routed_scaling_factor())});
  return out;
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
  if (m.family() == "gpt2")
    return render(gpt2Config(m));
  if (m.moe().naming() == "mixtral")
    return render(mixtralConfig(m));
  if (m.moe().naming() == "deepseek_v3")
    return render(deepseekConfig(m));
  return render(llamaConfig(m));
}

} // namespace braid::ckpt
