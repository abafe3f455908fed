// RUN: braid-opt %s -split-input-file -verify-diagnostics

// The module's settings. Every setting is required, in its place: a missing
// one is a parse error that names it, never a silent 0.

// braid.train: lr is missing.
// expected-error @+1 {{expected 'lr'}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.0e-4, precision = fp32>} {
}

// -----

// braid.model: the family is missing.
// expected-error @+1 {{expected 'family'}}
module attributes {braid.model = #braid.model<vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.2e+03>} {
}

// -----

// braid.train: the decay is cosine or constant.
// expected-error @+2 {{expected one of [cosine, constant] for how the learning rate falls after warm-up, got: linear}}
// expected-error @+1 {{failed to parse Braid_TrainAttr parameter 'decay'}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = linear, min_lr = 1.0e-4, precision = fp32>} {
}

// -----

// braid.train: the precision is fp32 or bf16.
// expected-error @+2 {{expected one of [fp32, bf16] for the element type of activations and of the weights compute reads, got: fp16}}
// expected-error @+1 {{failed to parse Braid_TrainAttr parameter 'precision'}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.0e-4, precision = fp16>} {
}

// -----

// braid.model: the family is llama or gpt2.
// expected-error @+2 {{expected one of [llama, gpt2] for the architecture family, which decides checkpoint naming, got: mistral}}
// expected-error @+1 {{failed to parse Braid_ModelAttr parameter 'family'}}
module attributes {braid.model = #braid.model<family = mistral, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.2e+03>} {
}

// -----

// braid.model: the norm epsilon config.json states is missing.
// expected-error @+1 {{expected 'norm_eps'}}
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.2e+03, activation = swiglu, rope_theta = 1.0e+4, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.0, attention_dropout = 0.0>} {
}

// -----

// braid.model: the activation is swiglu or gelu_tanh.
// expected-error @+2 {{expected one of [swiglu, gelu_tanh] for the MLP's activation, got: relu}}
// expected-error @+1 {{failed to parse Braid_ModelAttr parameter 'activation'}}
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.2e+03, activation = relu, norm_eps = 1.0e-5, rope_theta = 1.0e+4, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.0, attention_dropout = 0.0>} {
}

// -----

// braid.train: a decimal setting takes a float literal.
// expected-error @+3 {{unexpected decimal integer literal for a floating point value}}
// expected-note @+2 {{add a trailing dot to make the literal a float}}
// expected-error @+1 {{failed to parse Braid_TrainAttr parameter 'lr'}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.0e-4, precision = fp32>} {
}

// -----

// braid.train is a #braid.train, not a dictionary.
// expected-error @+1 {{'builtin.module' op 'braid.train' must be a #braid.train<...>, not {num_micro_batches = 1 : i64}}}
module attributes {braid.train = {num_micro_batches = 1 : i64}} {
}

// -----

// braid.model is a #braid.model.
// expected-error @+1 {{'builtin.module' op 'braid.model' must be a #braid.model<...>, not "llama"}}
module attributes {braid.model = "llama"} {
}

// -----

// The settings belong on the module.
// expected-error @+1 {{'func.func' op 'braid.train' belongs on the module, not on an op}}
func.func @f() attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.0e-4, precision = fp32>} {
  return
}

// -----

// braid.stage: stages are numbered from 0.
// expected-error @+1 {{a stage is numbered from 0, not -1}}
func.func @f() attributes {braid.stage = #braid.stage<-1>} {
  return
}

// -----

// braid.stage is a #braid.stage.
// expected-error @+1 {{'func.func' op 'braid.stage' must be a #braid.stage, not 0 : i64}}
func.func @f() attributes {braid.stage = 0} {
  return
}

// -----

// braid.stage marks functions.
// expected-error @+1 {{'builtin.module' op 'braid.stage' marks a func.func, not this op}}
module attributes {braid.stage = #braid.stage<0>} {
}

// -----

// A stage has one function.
func.func @a() attributes {braid.stage = #braid.stage<0>} {
  return
}
// expected-error @+1 {{'func.func' op is stage 0 like @a; a stage has one function}}
func.func @b() attributes {braid.stage = #braid.stage<0>} {
  return
}
