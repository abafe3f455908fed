// RUN: braid-opt %s --braid-autodiff --braid-shard --split-input-file --verify-diagnostics | FileCheck %s

// Ring attention over two context-parallel ranks: the inputs are taken
// apart along the sequence (each rank keeps 4 of the 8 positions, in two
// chunks), every activation holds the rank's part, RoPE and dropout go by
// positions in the whole sequence, and attention runs in two flash steps,
// the second over the key and value block passed on from the other rank,
// joined by their lse. Backward runs the steps in reverse, passing the
// blocks back with their gradients; the weight gradients stay whole.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[IDS:.+]] = braid.take_part %arg0 {axis = #braid.axis<cp>{{.*}}dim = 1 : i64} : (tensor<2x8xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[X:.+]] = braid.embedding %arg2, %[[IDS]] {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[R:.+]] = braid.rope {{.*}}cp = true{{.*}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[O0:.+]], %[[L0:.+]] = braid.flash_attention %[[R]], %[[R]], %[[X]] {{.*}}cp = true, cp_kv_step = 0 : i64{{.*}} -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[K1:.+]] = braid.comm.shift %[[R]] {axis = #braid.axis<cp>{{.*}}offset = 1 : i64}
// CHECK-NEXT: %[[V1:.+]] = braid.comm.shift %[[X]] {axis = #braid.axis<cp>{{.*}}offset = 1 : i64}
// CHECK-NEXT: %[[O1:.+]], %[[L1:.+]] = braid.flash_attention %[[R]], %[[K1]], %[[V1]] {{.*}}cp_kv_step = 1 : i64
// CHECK-NEXT: %[[O:.+]], %[[L:.+]] = braid.attention_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]]
// CHECK-NEXT: braid.dropout %[[O]] {{.*}}cp_dim = 1 : i64
// CHECK: braid.take_part %arg1 {axis = #braid.axis<cp>
// CHECK: %[[BK:.+]] = braid.comm.shift %[[R]] {{.*}}offset = -1 : i64
// CHECK-NEXT: %[[BV:.+]] = braid.comm.shift %[[X]] {{.*}}offset = -1 : i64
// CHECK-NEXT: %[[DQ1:.+]], %[[DK1:.+]], %[[DV1:.+]] = braid.flash_attention_grad_input %{{.+}}, %[[R]], %[[BK]], %[[BV]], %[[O]], %[[L]] {{.*}}cp_kv_step = 1 : i64
// CHECK-NEXT: %[[DQ0:.+]], %[[DK0:.+]], %[[DV0:.+]] = braid.flash_attention_grad_input %{{.+}}, %[[R]], %[[R]], %[[X]], %[[O]], %[[L]] {{.*}}cp_kv_step = 0 : i64
// CHECK-NEXT: braid.add %[[DQ1]], %[[DQ0]]
// CHECK-NEXT: %[[PK:.+]] = braid.comm.shift %[[DK1]] {{.*}}offset = -1 : i64
// CHECK-NEXT: braid.add %[[PK]], %[[DK0]]
// CHECK-NEXT: %[[PV:.+]] = braid.comm.shift %[[DV1]] {{.*}}offset = -1 : i64
// CHECK-NEXT: braid.add %[[PV]], %[[DV0]]
// CHECK: braid.rope_grad_input {{.*}}cp = true
// CHECK: braid.linear_grad_weight {{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK: return {{.*}} : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>

module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 2, pp = 1, dp = 1>, braid.train = #braid.train<seed = 1, micro_batch_size = 2, num_micro_batches = 1, seq_len = 8, steps = 1, lr = 1.0e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.0, grad_clip = 1.0, warmup_steps = 0, decay = constant, min_lr = 0.0, precision = fp32>} {
func.func @train_step(%ids: tensor<2x8xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x8xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %wq: tensor<8x8xf32> {braid.param = #braid.param<name = "wq", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %q = braid.linear %x, %wq {braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %r = braid.rope %q {num_heads = 2 : i64, theta = 1.0e+04 : f32, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o, %p = braid.attention %r, %r, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 1 : i64, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x2x8x8xf32>)
  %d = braid.dropout %o {p = 0.1 : f32, rng_offset = 2 : i64, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = braid.linear %d, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8xf32>)
  return %loss : tensor<f32>
}
}

// -----

// With braid.cp_all_gather the keys and values are gathered along the
// sequence before the attention, which reads the rank's queries against the
// whole sequence, and again before its backward; the key and value
// gradients are reduce-scattered back to the parts.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[K:.+]] = braid.comm.all_gather %[[R:.+]] {axis = #braid.axis<cp>{{.*}}dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[V:.+]] = braid.comm.all_gather %[[X:.+]] {axis = #braid.axis<cp>
// CHECK-NEXT: braid.attention %[[R]], %[[K]], %[[V]] {{.*}}cp = true{{.*}} -> (tensor<2x4x8xf32>, tensor<2x2x4x8xf32>)
// CHECK: %[[BK:.+]] = braid.comm.all_gather %[[R]] {{.*}}braid.phase = #braid.phase<input_grad>
// CHECK-NEXT: %[[BV:.+]] = braid.comm.all_gather %[[X]] {{.*}}braid.phase = #braid.phase<input_grad>
// CHECK-NEXT: %{{.+}}, %[[DK:.+]], %[[DV:.+]] = braid.attention_grad_input %{{.+}}, %[[R]], %[[BK]], %[[BV]], {{.*}}cp = true
// CHECK-NEXT: braid.comm.reduce_scatter %[[DK]] {axis = #braid.axis<cp>{{.*}} : (tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: braid.comm.reduce_scatter %[[DV]] {axis = #braid.axis<cp>
module attributes {braid.cp_all_gather, braid.mesh = #braid.mesh<tp = 1, cp = 2, pp = 1, dp = 1>, braid.train = #braid.train<seed = 1, micro_batch_size = 2, num_micro_batches = 1, seq_len = 8, steps = 1, lr = 1.0e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.0, grad_clip = 1.0, warmup_steps = 0, decay = constant, min_lr = 0.0, precision = fp32>} {
func.func @train_step(%ids: tensor<2x8xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x8xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %wq: tensor<8x8xf32> {braid.param = #braid.param<name = "wq", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %q = braid.linear %x, %wq {braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %r = braid.rope %q {num_heads = 2 : i64, theta = 1.0e+04 : f32, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o, %p = braid.attention %r, %r, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 1 : i64, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x2x8x8xf32>)
  %d = braid.dropout %o {p = 0.1 : f32, rng_offset = 2 : i64, braid.layer = #braid.layer<0>} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = braid.linear %d, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8xf32>)
  return %loss : tensor<f32>
}
}

// -----

// The sequence must cut into 2 x CP equal chunks.
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 2, pp = 1, dp = 1>, braid.train = #braid.train<seed = 1, micro_batch_size = 2, num_micro_batches = 1, seq_len = 6, steps = 1, lr = 1.0e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.0, grad_clip = 1.0, warmup_steps = 0, decay = constant, min_lr = 0.0, precision = fp32>} {
// expected-error @+1 {{braid-shard: a sequence of 6 positions does not cut into 4 equal chunks for 2 context-parallel ranks}}
func.func @train_step(%ids: tensor<2x6xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x6xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %wq: tensor<8x8xf32> {braid.param = #braid.param<name = "wq", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x6xi32>) -> tensor<2x6x8xf32>
  %q = braid.linear %x, %wq {braid.layer = #braid.layer<0>} : (tensor<2x6x8xf32>, tensor<8x8xf32>) -> tensor<2x6x8xf32>
  %r = braid.rope %q {num_heads = 2 : i64, theta = 1.0e+04 : f32, braid.layer = #braid.layer<0>} : (tensor<2x6x8xf32>) -> tensor<2x6x8xf32>
  %o, %p = braid.attention %r, %r, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 1 : i64, braid.layer = #braid.layer<0>} : (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> (tensor<2x6x8xf32>, tensor<2x2x6x6xf32>)
  %d = braid.dropout %o {p = 0.1 : f32, rng_offset = 2 : i64, braid.layer = #braid.layer<0>} : (tensor<2x6x8xf32>) -> tensor<2x6x8xf32>
  %logits = braid.linear %d, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x6x8xf32>, tensor<16x8xf32>) -> tensor<2x6x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x6x16xf32>, tensor<2x6xi32>) -> (tensor<f32>, tensor<2x6xf32>)
  return %loss : tensor<f32>
}
}
