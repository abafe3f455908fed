// RUN: braid-opt %s --split-input-file --braid-fuse-linear-cross-entropy="chunk=64 min-chunk-rows=2" | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-fuse-linear-cross-entropy | FileCheck %s --check-prefix=DEFAULT
// RUN: braid-opt /dev/null --braid-training-pipeline="spec=%models/gpt2-tiny.pbtxt fusion=linear-cross-entropy" | FileCheck %s --check-prefix=SCHED

// A tied table: the LM head reads the embedding table, whose gradient sums
// the head's and the embedding's contributions.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: braid.linear
// CHECK-NOT: braid.cross_entropy
// CHECK: %[[X:.+]] = braid.embedding %arg2, %arg0
// The workspace: chunk = 64 logits are 4 rows of 16, at least 2 (of 8).
// CHECK: %[[LOSS:.+]], %[[DX:.+]], %[[DW:.+]], %{{.+}} = braid.linear_cross_entropy_with_grad %[[X]], %arg2, %arg1 {scale = 1.000000e+00 : f32} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<4x16xf32>)
// By default the workspace holds at least 2048 rows, here all 8.
// DEFAULT-LABEL: func.func @train_step
// DEFAULT: braid.linear_cross_entropy_with_grad {{.+}} -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>)
// CHECK: %[[DT:.+]] = braid.embedding_grad_weight %[[DX]], %arg0
// CHECK: %[[SUM:.+]] = braid.add %[[DW]], %[[DT]]
// CHECK: return %[[LOSS]], %[[SUM]]

// gpt2-tiny (tied, 2 micro-batches), lowered: neither the head's linear
// (the only one without a bias) nor the cross-entropy launches are left;
// the fused launch ends the forward, its dW accumulates into the tied
// table's gradient like linear_grad_weight, before the embedding's, and it
// gets 1/num_micro_batches.
// SCHED-LABEL: sched.program @step
// SCHED: sched.repeat 2
// SCHED-NOT: "linear" on 0 ins(%{{[0-9]+}}, %{{[0-9]+}} : memref
// SCHED-NOT: "cross_entropy
// SCHED: %[[TG:.+]] = sched.get_global @transformer.wte.weight.grad
// SCHED: sched.launch "linear_cross_entropy_with_grad" on 0 ins({{.+}} : memref<8x64x64xf32>, memref<256x64xf32>, memref<8x64xi32>) outs({{.+}} : memref<f32>, memref<8x64x64xf32>, memref<256x64xf32>, memref<512x256xf32>) params {accumulate = 1 : i64, scale = 5.000000e-01 : f64}
// SCHED-NOT: "cross_entropy
// SCHED-NOT: "linear_grad_weight" on 0 ins(%{{.+}} : memref<8x64x256xf32>, memref<8x64x64xf32>) outs(%{{.+}} : memref<256x64xf32>)
// SCHED: sched.launch "layer_norm_grad_input"
// SCHED: %[[TG2:.+]] = sched.get_global @transformer.wte.weight.grad
// SCHED: sched.launch "embedding_grad_weight" on 0 ins({{.+}}) outs(%[[TG2]] : memref<256x64xf32>) params {accumulate = 1 : i64}
// SCHED: sched.launch "grad_norm"

module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1, grad_clip = 1.0, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  func.func @train_step(%tokens: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                        %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                        %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>})
      -> (tensor<f32> {braid.loss}, tensor<16x8xf32>) {
    %x = braid.embedding %table, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %logits = braid.linear %x, %table : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
    %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
    %dx = braid.linear_grad_input %dl, %table : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %dw = braid.linear_grad_weight %dl, %x : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
    %dt = braid.embedding_grad_weight %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    %g = braid.add %dw, %dt : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    return %loss, %g : tensor<f32>, tensor<16x8xf32>
  }
}

// -----

// bf16 storage: the weight gradient stays f32 over bf16 operands.
// CHECK-LABEL: func.func @bf16
// CHECK: braid.linear_cross_entropy_with_grad %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f32} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xbf16>, tensor<16x8xf32>, tensor<4x16xf32>)
func.func @bf16(%x: tensor<2x4x8xbf16>, %w: tensor<16x8xbf16>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xbf16>, tensor<16x8xf32>) {
  %logits = braid.linear %x, %w : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<2x4x16xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x16xbf16>
  %dx = braid.linear_grad_input %dl, %w : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
  %dw = braid.linear_grad_weight %dl, %x : (tensor<2x4x16xbf16>, tensor<2x4x8xbf16>) -> tensor<16x8xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<2x4x8xbf16>, tensor<16x8xf32>
}

// -----

// Forward only (no backward in the graph): the forward alone is fused.
// CHECK-LABEL: func.func @forward_only
// CHECK-NEXT: %{{.+}}, %{{.+}} = braid.linear_cross_entropy %arg0, %arg1, %arg2
// CHECK-NEXT: return
func.func @forward_only(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>) -> tensor<f32> {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  return %loss : tensor<f32>
}

// -----

// The logits have another reader: nothing changes.
// CHECK-LABEL: func.func @logits_used_elsewhere
// CHECK: braid.linear
// CHECK: braid.cross_entropy
// CHECK-NOT: braid.linear_cross_entropy
func.func @logits_used_elsewhere(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>) -> (tensor<f32>, tensor<4x16xf32>) {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  return %loss, %logits : tensor<f32>, tensor<4x16xf32>
}

// -----

// A biased head is not fused.
// CHECK-LABEL: func.func @bias
// CHECK: braid.linear %arg0, %arg1, %arg3
// CHECK-NOT: braid.linear_cross_entropy
func.func @bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>, %b: tensor<16xf32>) -> tensor<f32> {
  %logits = braid.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  return %loss : tensor<f32>
}

// -----

// The cross-entropy does not read a linear's result.
// CHECK-LABEL: func.func @no_linear
// CHECK: braid.cross_entropy %arg0
// CHECK-NOT: braid.linear_cross_entropy
func.func @no_linear(%logits: tensor<4x16xf32>, %labels: tensor<4xi32>) -> tensor<f32> {
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  return %loss : tensor<f32>
}

// -----

// The logits gradient has a reader outside the group (it is returned): the
// dlogits must exist, so nothing changes.
// CHECK-LABEL: func.func @dlogits_used_elsewhere
// CHECK: braid.linear
// CHECK: braid.cross_entropy_grad_input
// CHECK-NOT: braid.linear_cross_entropy
func.func @dlogits_used_elsewhere(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>) -> (tensor<f32>, tensor<4x16xf32>, tensor<4x8xf32>) {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<4x16xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x16xf32>
  %dx = braid.linear_grad_input %dl, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %loss, %dl, %dx : tensor<f32>, tensor<4x16xf32>, tensor<4x8xf32>
}

// -----

// The backward multiplies the logits gradient with another weight of the
// same shape: not the head's gradient, so nothing changes.
// CHECK-LABEL: func.func @other_weight
// CHECK: braid.linear_grad_input %{{.+}}, %arg3
// CHECK-NOT: braid.linear_cross_entropy
func.func @other_weight(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>, %w2: tensor<16x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<4x16xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x16xf32>
  %dx = braid.linear_grad_input %dl, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %loss, %dx : tensor<f32>, tensor<4x8xf32>
}

// -----

// The cross-entropy's gradient reads other labels than the forward.
// CHECK-LABEL: func.func @other_labels
// CHECK: braid.cross_entropy_grad_input %{{.+}}, %arg3
// CHECK-NOT: braid.linear_cross_entropy
func.func @other_labels(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>, %labels2: tensor<4xi32>) -> (tensor<f32>, tensor<4x16xf32>) {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels2, %lse {scale = 1.0 : f32} : (tensor<4x16xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x16xf32>
  return %loss, %dl : tensor<f32>, tensor<4x16xf32>
}

// -----

// Only the input gradient is wanted (a frozen head): dW does not exist, so
// fusing would compute it for nothing; nothing changes.
// CHECK-LABEL: func.func @input_grad_only
// CHECK: braid.linear_grad_input
// CHECK-NOT: braid.linear_cross_entropy
func.func @input_grad_only(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %logits = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<4x16xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<4x16xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x16xf32>
  %dx = braid.linear_grad_input %dl, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %loss, %dx : tensor<f32>, tensor<4x8xf32>
}

// -----

// Vocabulary-parallel (braid-shard's form under TP 2 with sequence
// parallel): the statistics become linear_cross_entropy_stats at their
// place; the backward, from the group's lse, linear_cross_entropy_grad at
// the place of the logits' gradient, reading the forward's gathered input,
// and the gather again for the weight gradient goes.
// CHECK-LABEL: func.func @vocab_parallel
// CHECK: %[[X:.+]] = braid.comm.all_gather %arg0
// CHECK-NEXT: %[[ST:.+]] = braid.linear_cross_entropy_stats %[[X]], %arg1, %arg2 {chunk = 64 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[ALL:.+]] = braid.comm.all_gather %[[ST]]
// CHECK-NEXT: %{{.+}}, %[[LSE:.+]] = braid.cross_entropy_combine %[[ALL]], %arg2
// CHECK-NEXT: %[[DX:.+]], %[[DW:.+]], %{{.+}} = braid.linear_cross_entropy_grad %[[X]], %arg1, %arg2, %[[LSE]] {scale = 1.000000e+00 : f32} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT: braid.comm.reduce_scatter %[[DX]]
// CHECK-NOT: braid.comm.all_gather
// CHECK: return
func.func @vocab_parallel(%part: tensor<2x2x8xf32>, %w: tensor<8x8xf32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x2x8xf32>, tensor<8x8xf32>) {
  %x = braid.comm.all_gather %part {axis = #braid.axis<tp>, dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %st = braid.cross_entropy_stats %logits, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x3xf32>
  %all = braid.comm.all_gather %st {axis = #braid.axis<tp>} : (tensor<2x4x3xf32>) -> tensor<4x4x3xf32>
  %loss, %lse = braid.cross_entropy_combine %all, %labels : (tensor<4x4x3xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32, vocab_shard = true} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x8xf32>
  %dxp = braid.linear_grad_input %dl, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dx = braid.comm.reduce_scatter %dxp {axis = #braid.axis<tp>, dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
  %again = braid.comm.all_gather %part {axis = #braid.axis<tp>, dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %dw = braid.linear_grad_weight %dl, %again : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<2x2x8xf32>, tensor<8x8xf32>
}

// -----

// The logits' gradient without vocab_shard (not braid-shard's form): the
// group is left alone.
// CHECK-LABEL: func.func @shard_grad_without_vocab_shard
// CHECK: braid.linear %arg0, %arg1
// CHECK-NOT: braid.linear_cross_entropy
func.func @shard_grad_without_vocab_shard(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<8x8xf32>) {
  %logits = braid.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %st = braid.cross_entropy_stats %logits, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x3xf32>
  %all = braid.comm.all_gather %st {axis = #braid.axis<tp>} : (tensor<2x4x3xf32>) -> tensor<4x4x3xf32>
  %loss, %lse = braid.cross_entropy_combine %all, %labels : (tensor<4x4x3xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x8xf32>
  %dx = braid.linear_grad_input %dl, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw = braid.linear_grad_weight %dl, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<8x8xf32>
}
