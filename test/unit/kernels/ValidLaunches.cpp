#include "test/unit/kernels/ValidLaunches.h"

#include <cstdlib>
#include <string_view>

namespace braid::test {

absl::Status Sig::check() const {
  const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
  if (!def)
    return absl::NotFoundError(kernel);
  return def->check(KernelSignature{ins, outs, &params});
}

constexpr DType kI32 = DType::kI32;

// One valid launch of every kernel in the catalogue.
std::map<std::string, Sig> validLaunches() {
  std::map<std::string, Sig> m;
  auto add = [&](const char *name) -> Sig & {
    Sig &s = m[name];
    s.kernel = name;
    return s;
  };
  add("embedding").in({11, 4}).in({2, 3}, kI32).out({2, 3, 4});
  add("embedding_grad_weight")
      .in({2, 3, 4})
      .in({2, 3}, kI32)
      .out({11, 4})
      .i("accumulate", 1);
  add("document_ids").in({2, 5}, kI32).out({2, 5}, kI32).i("separator", 3);
  add("moe_route")
      .in({4, 6})
      .in({6})
      .out({4, 2}, kI32)
      .out({4, 2})
      .out({4, 6})
      .i("normalize", 1)
      .f("scale", 2.5);
  add("moe_scores").in({4, 6}).out({4, 6});
  add("moe_scores_grad").in({4, 6}).in({4, 6}).out({4, 6}).i("sigmoid", 1);
  add("moe_topk")
      .in({4, 6})
      .in({6})
      .out({4, 2}, kI32)
      .out({4, 2})
      .i("normalize", 1)
      .f("scale", 2.5);
  add("moe_topk_grad")
      .in({4, 2})
      .in({4, 6})
      .in({4, 2}, kI32)
      .out({4, 6})
      .i("normalize", 1);
  add("moe_sort").in({6, 2}, kI32).out({6, 2}, kI32).out({5}, kI32);
  add("moe_gather").in({2, 3, 5}).in({6, 2}, kI32).out({12, 5});
  add("moe_gather_choices").in({12, 5}).in({6, 2}, kI32).out({6, 2, 5});
  add("moe_gather_choices_grad").in({6, 2, 5}).in({6, 2}, kI32).out({12, 5});
  add("moe_weighted_sum").in({6, 2, 5}).in({6, 2}).out({6, 5});
  add("moe_weighted_sum_grad")
      .in({6, 5})
      .in({6, 2, 5})
      .in({6, 2})
      .out({6, 2, 5})
      .out({6, 2});
  add("moe_permute")
      .in({2, 3, 5})
      .in({6, 2}, kI32)
      .out({12, 5})
      .out({6, 2}, kI32)
      .out({5}, kI32);
  add("moe_permute_grad").in({12, 5}).in({6, 2}, kI32).out({2, 3, 5});
  add("moe_unpermute")
      .in({12, 5})
      .in({6, 2}, kI32)
      .in({6, 2})
      .out({2, 3, 5});
  add("moe_unpermute_grad")
      .in({2, 3, 5})
      .in({12, 5})
      .in({6, 2}, kI32)
      .in({6, 2})
      .out({12, 5})
      .out({6, 2});
  add("moe_grouped_linear")
      .in({12, 5})
      .in({4, 3, 5})
      .in({5}, kI32)
      .out({12, 3});
  add("moe_grouped_linear_grad_input")
      .in({12, 3})
      .in({4, 3, 5})
      .in({5}, kI32)
      .out({12, 5});
  add("moe_grouped_linear_grad_weight")
      .in({12, 3})
      .in({12, 5})
      .in({5}, kI32)
      .out({4, 3, 5});
  add("moe_batched_linear").in({12, 5}).in({4, 3, 5}).out({12, 3});
  add("moe_batched_linear_grad_input").in({12, 3}).in({4, 3, 5}).out({12, 5});
  add("moe_batched_linear_grad_weight").in({12, 3}).in({12, 5}).out({4, 3, 5});
  add("moe_expert_counts").in({6, 2}, kI32).out({4});
  add("moe_keep_rows").in({12, 3}).in({5}, kI32).out({6, 3});
  add("moe_restore_rows").in({6, 3}).in({5}, kI32).out({12, 3});
  add("moe_block_counts").in({5}, kI32).out({4}, kI32);
  add("moe_ep_offsets").in({8}, kI32).out({5}, kI32);
  add("moe_hot_experts")
      .in({8}, kI32)
      .out({2}, kI32)
      .out({8}, kI32)
      .i("ranks", 2)
      .f("threshold", 1.5);
  add("moe_split_tokens").in({2, 4, 3}).out({2, 2, 3}).out({2, 2, 3});
  add("moe_join_tokens").in({2, 2, 3}).in({2, 2, 3}).out({2, 4, 3});
  add("moe_split_rows")
      .in({12, 3})
      .in({5}, kI32)
      .in({2}, kI32)
      .out({12, 3})
      .out({6, 3})
      .out({3}, kI32);
  add("moe_merge_rows")
      .in({12, 3})
      .in({6, 3})
      .in({5}, kI32)
      .in({2}, kI32)
      .out({12, 3});
  add("moe_aux_loss").in({6, 4}).in({4}).out({}).i("top_k", 2);
  add("moe_aux_loss_grad").in({6, 4}).in({4}).out({6, 4});
  add("moe_z_loss").in({6, 4}).out({});
  add("moe_bias_update").in({4}).in({}).out({4});
  add("moe_z_loss_grad").in({6, 4}).out({6, 4});
  add("moe_route_grad")
      .in({4, 2})
      .in({4, 6})
      .in({4, 2}, kI32)
      .out({4, 6})
      .i("sigmoid", 1)
      .i("normalize", 1);
  add("linear").in({2, 3, 4}).in({5, 4}).in({5}).out({2, 3, 5});
  add("linear_grad_input").in({2, 3, 5}).in({5, 4}).out({2, 3, 4});
  add("linear_grad_weight").in({2, 3, 5}).in({2, 3, 4}).out({5, 4}).out({5});
  add("layer_norm").in({2, 8}).in({8}).in({8}).out({2, 8}).out({2}).out({2});
  m["layer_norm"].f("eps", 1e-5);
  add("layer_norm_grad_input")
      .in({2, 8})
      .in({2, 8})
      .in({8})
      .in({2})
      .in({2})
      .out({2, 8});
  add("layer_norm_grad_weight")
      .in({2, 8})
      .in({2, 8})
      .in({2})
      .in({2})
      .out({8})
      .out({8});
  add("rms_norm").in({2, 8}).in({8}).out({2, 8}).out({2}).f("eps", 1e-6);
  add("rms_norm_grad_input").in({2, 8}).in({2, 8}).in({8}).in({2}).out({2, 8});
  add("rms_norm_grad_weight").in({2, 8}).in({2, 8}).in({2}).out({8});
  auto attn = [](Sig &s) {
    s.i("num_heads", 4).i("num_kv_heads", 2).i("causal", 1);
    s.f("scale", 0.5).f("dropout", 0.1).i("rng_offset", 3);
  };
  attn(add("attention")
           .in({2, 3, 16})
           .in({2, 3, 8})
           .in({2, 3, 8})
           .out({2, 3, 16})
           .out({2, 4, 3, 3}));
  attn(add("attention_grad_input")
           .in({2, 3, 16})
           .in({2, 3, 16})
           .in({2, 3, 8})
           .in({2, 3, 8})
           .in({2, 4, 3, 3})
           .out({2, 3, 16})
           .out({2, 3, 8})
           .out({2, 3, 8}));
  auto flash = [](Sig &s) {
    s.i("num_heads", 4).i("num_kv_heads", 2).i("causal", 1).i("prefix", 1);
    s.f("scale", 0.5).f("dropout", 0.1).i("rng_offset", 3);
  };
  flash(add("flash_attention")
            .in({2, 3, 16})
            .in({2, 3, 8})
            .in({2, 3, 8})
            .out({2, 3, 16})
            .out({2, 4, 3}));
  flash(add("flash_attention_grad_input")
            .in({2, 3, 16})
            .in({2, 3, 16})
            .in({2, 3, 8})
            .in({2, 3, 8})
            .in({2, 3, 16})
            .in({2, 4, 3})
            .in({2, 3}, kI32)
            .out({2, 3, 16})
            .out({2, 3, 8})
            .out({2, 3, 8}));
  // Two ring steps' flash outputs merged (context parallelism).
  add("attention_merge")
      .in({2, 3, 16})
      .in({2, 4, 3})
      .in({2, 3, 16})
      .in({2, 4, 3})
      .out({2, 3, 16})
      .out({2, 4, 3})
      .i("num_heads", 4);
  add("repeat_kv")
      .in({2, 3, 8})
      .out({2, 3, 16})
      .i("num_heads", 4)
      .i("num_kv_heads", 2);
  add("repeat_kv_grad_input")
      .in({2, 3, 16})
      .out({2, 3, 8})
      .i("num_heads", 4)
      .i("num_kv_heads", 2);
  add("rope").in({2, 3, 16}).out({2, 3, 16}).i("num_heads", 2).f("theta", 1e4);
  add("rope_grad_input")
      .in({2, 3, 16})
      .out({2, 3, 16})
      .i("num_heads", 2)
      .f("theta", 1e4);
  add("gelu").in({3, 5}).out({3, 5});
  add("gelu_grad_input").in({3, 5}).in({3, 5}).out({3, 5});
  add("swiglu").in({3, 5}).in({3, 5}).out({3, 5});
  add("swiglu_grad_input")
      .in({3, 5})
      .in({3, 5})
      .in({3, 5})
      .out({3, 5})
      .out({3, 5});
  add("add").in({3, 5}).in({3, 5}).out({3, 5});
  add("dropout").in({3, 5}).out({3, 5}).f("p", 0.1).i("rng_offset", 0);
  add("dropout_grad_input")
      .in({3, 5})
      .out({3, 5})
      .f("p", 0.1)
      .i("rng_offset", 0);
  // Sequence-parallel layout copies, two parts (docs/kernels.md).
  add("take_part").in({2, 6, 5}).out({2, 3, 5}).i("dim", 1);
  add("stack_parts").in({2, 6, 5}).out({4, 3, 5}).i("dim", 1);
  add("unstack_parts").in({4, 3, 5}).out({2, 6, 5}).i("dim", 1);
  add("split").in({2, 9}).out({2, 3}).out({2, 3}).out({2, 3});
  add("split_grad_input").in({2, 3}).in({2, 3}).out({2, 6});
  add("cross_entropy").in({2, 3, 7}).in({2, 3}, kI32).out({}).out({2, 3});
  add("cross_entropy_grad_input")
      .in({2, 3, 7})
      .in({2, 3}, kI32)
      .in({2, 3})
      .out({2, 3, 7})
      .f("scale", 1.0);
  add("cross_entropy_stats").in({2, 3, 7}).in({2, 3}, kI32).out({2, 3, 3});
  // Two ranks' stats stacked along dimension 0.
  add("cross_entropy_combine")
      .in({4, 3, 3})
      .in({2, 3}, kI32)
      .out({})
      .out({2, 3});
  add("cast").in({3, 5}).out({3, 5}, DType::kBF16);
  add("accumulate").in({4}).out({4});
  add("fill").out({4}).f("value", 0.0);
  add("copy").in({2, 3}).out({2, 3});
  add("grad_norm").in({4}).in({2, 3}).out({});
  add("step_guard").in({}).in({}).out({});
  add("adamw")
      .in({4, 2})
      .in({})
      .in({})
      .out({4, 2})
      .out({4, 2})
      .out({4, 2})
      .f("beta1", 0.9)
      .f("beta2", 0.999)
      .f("eps", 1e-8)
      .f("weight_decay", 0.1)
      .f("grad_clip", 1.0);
  // Fused norm, activation and dropout kernels (docs/fusion.md).
  add("fused_add_layer_norm")
      .in({2, 8}).in({2, 8}).in({8}).in({8})
      .out({2, 8}).out({2, 8}).out({2}).out({2})
      .f("eps", 1e-5).f("p", 0.1).i("rng_offset", 2);
  add("fused_add_layer_norm_grad_input")
      .in({2, 8}).in({2, 8}).in({8}).in({2}).in({2}).in({2, 8})
      .out({2, 8});
  add("fused_add_rms_norm")
      .in({2, 8}).in({2, 8}).in({8})
      .out({2, 8}).out({2, 8}).out({2})
      .f("eps", 1e-5).f("p", 0.0).i("rng_offset", 0);
  add("fused_add_rms_norm_grad_input")
      .in({2, 8}).in({2, 8}).in({8}).in({2}).in({2, 8})
      .out({2, 8});
  add("fused_bias_gelu").in({3, 5}).in({5}).out({3, 5});
  add("fused_bias_swiglu").in({3, 5}).in({3, 5}).in({5}).in({5}).out({3, 5});
  add("fused_bias_swiglu_grad_input")
      .in({3, 5}).in({3, 5}).in({3, 5}).in({5}).in({5})
      .out({3, 5}).out({3, 5});
  add("fused_linear_rope")
      .in({2, 3, 4}).in({16, 4}).in({16})
      .out({2, 3, 16})
      .i("num_heads", 2).f("theta", 1e4);
  add("fused_linear_rope_grad_input")
      .in({2, 3, 16}).in({16, 4})
      .out({2, 3, 4}).out({2, 3, 16})
      .i("num_heads", 2).f("theta", 1e4);
  add("fused_bias_gelu_grad_input").in({3, 5}).in({3, 5}).in({5}).out({3, 5});
  add("fused_bias_dropout_add")
      .in({3, 5}).in({5}).in({3, 5})
      .out({3, 5})
      .f("p", 0.1).i("rng_offset", 3);
  // The LM head fused with cross-entropy, and multi-tensor AdamW.
  add("linear_cross_entropy")
      .in({2, 3, 4}).in({7, 4}).in({2, 3}, kI32)
      .out({}).out({2, 3})
      .i("chunk", 14);
  add("linear_cross_entropy_with_grad")
      .in({2, 3, 4}).in({7, 4}).in({2, 3}, kI32)
      .out({}).out({2, 3, 4}).out({7, 4}).out({4, 7})
      .f("scale", 0.5).i("accumulate", 1);
  add("linear_cross_entropy_stats")
      .in({2, 3, 4}).in({7, 4}).in({2, 3}, kI32)
      .out({2, 3, 3})
      .i("chunk", 14);
  add("linear_cross_entropy_grad")
      .in({2, 3, 4}).in({7, 4}).in({2, 3}, kI32).in({2, 3})
      .out({2, 3, 4}).out({7, 4}).out({4, 7})
      .f("scale", 0.5).i("accumulate", 1);
  add("multi_adamw")
      .in({4, 2}).in({3}).in({}).in({})
      .out({4, 2}).out({3}).out({4, 2}).out({3}).out({4, 2}).out({3})
      .f("beta1", 0.9).f("beta2", 0.999).f("eps", 1e-8)
      .f("weight_decay", 0.1).f("grad_clip", 1.0).i("decayed", 1);
  return m;
}


std::optional<Sig> bf16Launch(const Sig &valid) {
  Sig s = valid;
  for (auto *ops : {&s.ins, &s.outs})
    for (TensorDesc &d : *ops)
      if (d.dtype == DType::kF32)
        d.dtype = DType::kBF16;
  // Each round either succeeds, fails for another reason, or turns one more
  // operand back to f32: at most one round per operand.
  for (size_t round = 0; round <= s.ins.size() + s.outs.size(); ++round) {
    absl::Status st = s.check();
    if (st.ok())
      return s;
    // "<kernel>: input 2 (mean) has dtype bf16, expected f32..."
    const std::string msg(st.message());
    const std::string prefix = s.kernel + ": ";
    if (msg.rfind(prefix, 0) != 0 ||
        msg.find("has dtype bf16, expected f32") == std::string::npos)
      return std::nullopt;
    std::string_view rest = std::string_view(msg).substr(prefix.size());
    const bool input = rest.substr(0, 6) == "input ";
    if (!input && rest.substr(0, 7) != "output ")
      return std::nullopt;
    const size_t index = std::strtoul(
        std::string(rest.substr(input ? 6 : 7)).c_str(), nullptr, 10);
    auto &ops = input ? s.ins : s.outs;
    if (index >= ops.size() || ops[index].dtype != DType::kBF16)
      return std::nullopt;
    ops[index].dtype = DType::kF32;
  }
  return std::nullopt;
}

} // namespace braid::test
