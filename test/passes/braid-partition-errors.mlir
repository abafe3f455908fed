// RUN: braid-opt %s --braid-partition --split-input-file --verify-diagnostics

// A layout string that does not sum to the model's layers.
// expected-error @+1 {{pipeline_layout "E t | t*2 L": its t's sum to 3 layers, the model has 4}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.model = #braid.model<family = llama, vocab_size = 256, hidden_size = 64, num_layers = 4, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 1, flops_per_token = 1.0, activation = swiglu, norm_eps = 1.0e-5, rope_theta = 1.000000e+04, max_position_embeddings = 16, head_dim = 16, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64, layout = "E t | t*2 L"}} {
}

// -----

// More stages than layers: 2 ranks x 4 chunks for 4 layers.
// expected-error @+1 {{the pipeline has 8 stages but the model only 4 layers: every stage needs a layer at least; lower pipeline_parallel or virtual_stages}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.model = #braid.model<family = llama, vocab_size = 256, hidden_size = 64, num_layers = 4, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 1, flops_per_token = 1.0, activation = swiglu, norm_eps = 1.0e-5, rope_theta = 1.000000e+04, max_position_embeddings = 16, head_dim = 16, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.pipeline = {schedule = "INTERLEAVED", virtual_stages = 4 : i64}} {
}

// -----

// An unknown family.
// expected-error @+1 {{the module's braid.pipeline needs schedule = "GPIPE", "ONE_F_ONE_B", "INTERLEAVED", "ZB_H1" or "DUALPIPE_V"}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.model = #braid.model<family = llama, vocab_size = 256, hidden_size = 64, num_layers = 4, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 1, flops_per_token = 1.0, activation = swiglu, norm_eps = 1.0e-5, rope_theta = 1.000000e+04, max_position_embeddings = 16, head_dim = 16, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.pipeline = {schedule = "1F1B"}} {
}

// -----

// An explicit layout with a stage of its own for the loss, under DualPipeV's
// V: stage 3 sits on rank 0.
// (no error)
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.model = #braid.model<family = llama, vocab_size = 256, hidden_size = 64, num_layers = 4, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 1, flops_per_token = 1.0, activation = swiglu, norm_eps = 1.0e-5, rope_theta = 1.000000e+04, max_position_embeddings = 16, head_dim = 16, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.pipeline = {schedule = "DUALPIPE_V", virtual_stages = 1 : i64, layout = "E t*2 | t | t | L"}} {
  func.func private @dualpipev()
}
