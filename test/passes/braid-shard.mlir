// RUN: braid-opt %s --braid-autodiff --braid-shard --split-input-file --verify-diagnostics | FileCheck %s

// A block over two TP ranks, Megatron's way: the table (tied with the LM
// head) is split along the vocabulary, so the lookup is a partial sum; the
// up projection reads a replicated input and is column-parallel (rows
// split), the down projection reads a split one and is row-parallel
// (columns split, its bias added on rank 0 only) and its output is summed
// right away, as the lookup's is, so the residual stream is replicated;
// the cross-entropy gathers three numbers per token. Backward
// sums each column-parallel input gradient; the replicated norm's weight
// gradient needs no sum.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x8xf32> {{{.*}}name = "emb"{{[^}]*}}braid.tp = #braid.tp<split, dim = 0, blocks = 1>}
// CHECK-SAME: tensor<8xf32> {{{.*}}name = "norm"{{[^}]*}}braid.tp = #braid.tp<replicated, dim = 0, blocks = 1>}
// CHECK-SAME: tensor<6x8xf32> {{{.*}}name = "up"{{[^}]*}}braid.tp = #braid.tp<split, dim = 0, blocks = 1>}
// CHECK-SAME: tensor<8x6xf32> {{{.*}}name = "down"{{[^}]*}}braid.tp = #braid.tp<split, dim = 1, blocks = 1>}
// CHECK-SAME: tensor<8xf32> {{{.*}}name = "bias"{{[^}]*}}braid.tp = #braid.tp<replicated, dim = 0, blocks = 1>}
// CHECK: %[[X:.+]] = braid.embedding {{.*}}braid.tp = [#braid.tp<partial, dim = 0, blocks = 1>], vocab_shard = true} : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[XS:.+]] = braid.comm.all_reduce %[[X]] {axis = #braid.axis<tp>
// CHECK-NEXT: braid.rms_norm %[[XS]]
// CHECK-NEXT: %[[U:.+]] = braid.linear {{.*}}#braid.tp<split, dim = 2, blocks = 1>]} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: braid.gelu
// CHECK-NEXT: %[[D:.+]] = braid.linear {{.*}}#braid.tp<partial, dim = 0, blocks = 1>], partial_bias = true} : (tensor<2x4x6xf32>, tensor<8x6xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[DS:.+]] = braid.comm.all_reduce %[[D]]
// CHECK-NEXT: %[[R:.+]] = braid.add %[[XS]], %[[DS]] {{.*}}#braid.tp<replicated
// CHECK-NEXT: braid.rms_norm %[[R]]
// CHECK-NEXT: %[[LOGITS:.+]] = braid.linear {{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[ST:.+]] = braid.cross_entropy_stats %[[LOGITS]], {{.*}} -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[ALL:.+]] = braid.comm.all_gather %[[ST]] {{.*}} : (tensor<2x4x3xf32>) -> tensor<4x4x3xf32>
// CHECK-NEXT: %[[LOSS:.+]], %[[LSE:.+]] = braid.cross_entropy_combine %[[ALL]]
// CHECK-NEXT: braid.cross_entropy_grad_input %[[LOGITS]], %{{.+}}, %[[LSE]] {{.*}}vocab_shard = true
// CHECK-NEXT: %[[DF:.+]] = braid.linear_grad_input {{.*}}#braid.tp<partial
// CHECK-NEXT: braid.comm.all_reduce %[[DF]]
// CHECK: braid.linear_grad_weight {{.*}} -> (tensor<8x6xf32>, tensor<8xf32>)
// CHECK: %[[DU:.+]] = braid.linear_grad_input {{.*}} : (tensor<2x4x6xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: braid.comm.all_reduce %[[DU]]
// CHECK: braid.embedding_grad_weight {{.*}}vocab_shard = true} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<8x8xf32>
// CHECK: return %[[LOSS]]
module attributes {braid.mesh = #braid.mesh<tp = 2, cp = 1, pp = 1, dp = 1>} {
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %norm: tensor<8xf32> {braid.param = #braid.param<name = "norm", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>},
                      %up: tensor<12x8xf32> {braid.param = #braid.param<name = "up", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %down: tensor<8x12xf32> {braid.param = #braid.param<name = "down", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %bias: tensor<8xf32> {braid.param = #braid.param<name = "bias", init = zeros, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h, %rstd = braid.rms_norm %x, %norm {eps = 1.0e-05 : f32, braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %u = braid.linear %h, %up {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %g = braid.gelu %u {braid.layer = #braid.layer<0>} : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %d = braid.linear %g, %down, %bias {braid.layer = #braid.layer<0>} : (tensor<2x4x12xf32>, tensor<8x12xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = braid.add %x, %d {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %f, %frstd = braid.rms_norm %r, %norm {eps = 1.0e-05 : f32, braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %logits = braid.linear %f, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}
}

// -----

// A weight read by a column-parallel linear cannot also be a row-parallel
// one's: its rows are split, not its columns.
module attributes {braid.mesh = #braid.mesh<tp = 2, cp = 1, pp = 1, dp = 1>} {
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %w: tensor<8x8xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %a = braid.linear %x, %w {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{braid-shard: this row-parallel linear's weight is already laid out as #braid.tp<split, dim = 0, blocks = 1>}}
  %b = braid.linear %a, %w {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.linear %b, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}
}

// -----

// Without a TP group the module is left as it is.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: braid.tp
// CHECK-NOT: braid.comm
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = braid.linear %x, %emb {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}
