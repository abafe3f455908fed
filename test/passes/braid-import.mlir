// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt | FileCheck %s --check-prefix=LLAMA
// RUN: braid-opt %s --braid-import=spec=%models/gpt2-tiny.pbtxt | FileCheck %s --check-prefix=GPT2
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny-bf16.pbtxt | FileCheck %s --check-prefix=BF16
// RUN: not braid-opt %s --braid-import 2>&1 | FileCheck %s --check-prefix=NOSPEC
// RUN: not braid-opt %s --braid-import=spec=%S/Inputs/bad-heads.pbtxt 2>&1 | FileCheck %s --check-prefix=BAD

// The input is an empty module; the pass fills it from the spec.

// Llama: settings on the module, ids then parameters as arguments.
// LLAMA: module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 1, dp = 1>, braid.model = #braid.model<family = llama, vocab_size = 256, hidden_size = 64, num_layers = 2, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 123712, flops_per_token = 7.403520e+05, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 64, head_dim = 16, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>
// LLAMA-SAME: braid.name = "llama-tiny"
// LLAMA-SAME: braid.train = #braid.train<seed = 1234, micro_batch_size = 8, num_micro_batches = 2, seq_len = 64, steps = 300, lr = 3.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 20, decay = cosine, min_lr = 3.000000e-04, precision = fp32>
// LLAMA-LABEL: func.func @train_step
// LLAMA-SAME: tensor<8x64xi32> {braid.input = #braid.input<tokens>}
// LLAMA-SAME: tensor<8x64xi32> {braid.input = #braid.input<labels>}
// LLAMA-SAME: tensor<256x64xf32> {braid.param = #braid.param<name = "model.embed_tokens.weight", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = false>}
// LLAMA-SAME: name = "lm_head.weight"
// LLAMA-SAME: -> (tensor<f32> {braid.loss})
// One attention block: RMSNorm, q/k/v, RoPE with q and kv head counts,
// materialised GQA, causal attention, output projection, residual add.
// LLAMA: %[[EMB:.+]] = braid.embedding
// LLAMA: %[[H:.+]], %{{.+}} = braid.rms_norm %[[EMB]]
// LLAMA: %[[Q:.+]] = braid.linear %[[H]]
// LLAMA-SAME: -> tensor<8x64x64xf32>
// LLAMA: %[[K:.+]] = braid.linear %[[H]]
// LLAMA-SAME: -> tensor<8x64x32xf32>
// LLAMA: %[[V:.+]] = braid.linear %[[H]]
// LLAMA: %[[QR:.+]] = braid.rope %[[Q]] {braid.layer = #braid.layer<0>, num_heads = 4 : i64
// LLAMA: %[[KR:.+]] = braid.rope %[[K]] {braid.layer = #braid.layer<0>, num_heads = 2 : i64
// LLAMA: %[[KK:.+]] = braid.repeat_kv %[[KR]] {braid.layer = #braid.layer<0>, num_heads = 4 : i64, num_kv_heads = 2 : i64}
// LLAMA: %[[VV:.+]] = braid.repeat_kv %[[V]]
// LLAMA: %[[O:.+]], %{{.+}} = braid.attention %[[QR]], %[[KK]], %[[VV]] {braid.layer = #braid.layer<0>, causal = true, dropout = 0.000000e+00 : f32, num_heads = 4 : i64, num_kv_heads = 4 : i64, rng_offset = 1 : i64, scale = 2.500000e-01 : f32}
// LLAMA: %[[P:.+]] = braid.linear %[[O]]
// LLAMA: braid.add %[[EMB]], %[[P]]
// LLAMA: braid.swiglu
// LLAMA: %[[LOSS:.+]], %{{.+}} = braid.cross_entropy
// LLAMA: return %[[LOSS]]

// GPT-2: learned positions, fused q/k/v split three ways, biases, dropout
// sites numbered in forward order, tied LM head.
// GPT2: braid.model = #braid.model<family = gpt2,
// GPT2-SAME: activation = gelu_tanh, norm_eps = 9.9999997473787516E-6, rope_theta = 0.000000e+00, max_position_embeddings = 128, head_dim = 16, tie_embeddings = true, linear_bias = true, hidden_dropout = 0.10000000149011612, attention_dropout = 0.10000000149011612>
// GPT2: braid.input = #braid.input<positions>
// GPT2-SAME: name = "transformer.wte.weight"
// GPT2-SAME: name = "transformer.h.0.ln_1.weight", init = ones, init_std = 0.000000e+00, weight_decay = false, checkpoint_transposed = false
// GPT2-SAME: name = "transformer.h.0.ln_1.bias", init = zeros, init_std = 0.000000e+00, weight_decay = false
// GPT2-SAME: name = "transformer.h.0.attn.c_attn.weight", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = true
// GPT2-SAME: name = "transformer.h.0.attn.c_proj.weight", init = normal, init_std = 1.000000e-02
// GPT2-NOT: lm_head
// GPT2: %[[TOK:.+]] = braid.embedding %[[WTE:arg[0-9]+]]
// GPT2: %[[POS:.+]] = braid.embedding
// GPT2: %[[SUM:.+]] = braid.add %[[TOK]], %[[POS]]
// GPT2: braid.dropout %[[SUM]] {braid.layer = #braid.layer<embedding>, p = 1.000000e-01 : f32, rng_offset = 0 : i64}
// GPT2: braid.layer_norm
// GPT2: %[[QKV:.+]] = braid.linear %{{.+}}, %{{.+}}, %{{.+}} {braid.layer = #braid.layer<0>} :
// GPT2-SAME: -> tensor<8x64x192xf32>
// GPT2: %[[S:.+]]:3 = braid.split %[[QKV]]
// GPT2: braid.attention %[[S]]#0, %[[S]]#1, %[[S]]#2 {{.*}}dropout = 1.000000e-01 : f32{{.*}}rng_offset = 1 : i64
// GPT2: braid.dropout %{{.+}} {braid.layer = #braid.layer<0>, p = 1.000000e-01 : f32, rng_offset = 2 : i64}
// GPT2: braid.gelu
// GPT2: braid.dropout %{{.+}} {braid.layer = #braid.layer<0>, p = 1.000000e-01 : f32, rng_offset = 3 : i64}
// GPT2: braid.attention {{.*}}rng_offset = 4 : i64
// GPT2: braid.linear %{{.+}}, %[[WTE]] {braid.layer = #braid.layer<loss>} :
// GPT2-SAME: -> tensor<8x64x256xf32>

// BF16 records its precision among the training settings.
// BF16: braid.train = #braid.train<{{.*}}, precision = bf16>

// NOSPEC: error: braid-import needs a spec: --braid-import=spec=PATH
// BAD: bad-heads.pbtxt:6:3: model.num_heads:
