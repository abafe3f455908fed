// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// The model and training settings braid-import records: every setting in
// its place, enums as keywords, decimals printed so that they read back as
// the same double.
// CHECK-LABEL: module @settings attributes {
// CHECK-SAME: braid.model = #braid.model<family = gpt2, vocab_size = 256, hidden_size = 64, num_layers = 2, num_heads = 4, num_kv_heads = 4, ffn_hidden_size = 256, num_parameters = 124928, flops_per_token = 7.610880e+05, activation = gelu_tanh, norm_eps = 9.9999997473787516E-6, rope_theta = 0.000000e+00, max_position_embeddings = 128, head_dim = 16, tie_embeddings = true, linear_bias = true, hidden_dropout = 0.10000000149011612, attention_dropout = 0.000000e+00>
// CHECK-SAME: braid.train = #braid.train<seed = 18446744073709551615, micro_batch_size = 8, num_micro_batches = 2, seq_len = 64, steps = 300, lr = 3.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 0.000000e+00, grad_clip = 0.000000e+00, warmup_steps = 0, decay = constant, min_lr = 3.000000e-03, precision = bf16>
module @settings attributes {
  braid.model = #braid.model<family = gpt2, vocab_size = 256, hidden_size = 64,
      num_layers = 2, num_heads = 4, num_kv_heads = 4, ffn_hidden_size = 256,
      num_parameters = 124928, flops_per_token = 761088.0,
      activation = gelu_tanh, norm_eps = 9.9999997473787516E-6,
      rope_theta = 0.0, max_position_embeddings = 128, head_dim = 16,
      tie_embeddings = true, linear_bias = true,
      hidden_dropout = 0.10000000149011612, attention_dropout = 0.0>,
  braid.train = #braid.train<seed = 18446744073709551615, micro_batch_size = 8,
      num_micro_batches = 2, seq_len = 64, steps = 300, lr = 3.0e-3,
      beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.0,
      grad_clip = 0.0, warmup_steps = 0, decay = constant, min_lr = 3.0e-3,
      precision = bf16>} {
}

// The other values of the enums.
// CHECK-LABEL: module @llama_cosine_fp32 attributes {
// CHECK-SAME: braid.model = #braid.model<family = llama,{{.*}}, activation = swiglu, {{.*}}, tie_embeddings = false, linear_bias = false,
// CHECK-SAME: braid.train = #braid.train<{{.*}}, decay = cosine, min_lr = 1.000000e-04, precision = fp32>
module @llama_cosine_fp32 attributes {
  braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8,
      num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8,
      num_parameters = 200, flops_per_token = 1.2e+03, activation = swiglu,
      norm_eps = 1.0e-6, rope_theta = 5.0e+5, max_position_embeddings = 4,
      head_dim = 8, tie_embeddings = false, linear_bias = false,
      hidden_dropout = 0.0, attention_dropout = 0.0>,
  braid.train = #braid.train<seed = 7, micro_batch_size = 2,
      num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.0e-3,
      beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1,
      grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.0e-4,
      precision = fp32>} {
}

// A stage function: the graph of pipeline stage 0, found by this mark.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: attributes {braid.stage = #braid.stage<0>}
// CHECK-LABEL: func.func @stage1(
// CHECK-SAME: attributes {braid.stage = #braid.stage<1>}
func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {braid.stage = #braid.stage<0>} {
  return %x : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32>) -> tensor<4xf32> attributes {braid.stage = #braid.stage<1>} {
  return %x : tensor<4xf32>
}
