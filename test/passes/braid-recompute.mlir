// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute=policy=norm | FileCheck %s --check-prefix=NORM
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute=policy=full | FileCheck %s --check-prefix=FULL
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute=policy=block-1 | FileCheck %s --check-prefix=BLOCK
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute | FileCheck %s --check-prefix=NONE
// RUN: not braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-recompute=policy=softmax 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-recompute='policy=full|none' 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/pipeline_parallel: 1/pipeline_parallel: 2/' -e 's/num_layers: 2/num_layers: 4/' -e 's/global_batch_size: 16/global_batch_size: 32/' %models/llama-tiny.pbtxt > %t/pp.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/pp.pbtxt --braid-autodiff --braid-partition --braid-recompute='policy=full|selective' | FileCheck %s --check-prefix=PERSTAGE
// RUN: braid-opt %s --braid-import=spec=%t/pp.pbtxt --braid-autodiff --braid-partition --braid-recompute=policy=block-1 | FileCheck %s --check-prefix=PPBLOCK
// RUN: cp %models/llama-tiny.pbtxt %t/auto.pbtxt && echo 'compile { memory_budget_gb: 0.00586 }' >> %t/auto.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/auto.pbtxt --braid-autodiff --braid-partition --braid-recompute=policy=auto | FileCheck %s --check-prefix=AUTO
// RUN: not braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-recompute=policy=auto 2>&1 | FileCheck %s --check-prefix=NOBUDGET

// Granular (norm): each norm is cloned right before the first backward op
// that reads it (here the MLP's norm of layer 1, before its weight
// gradients), and the backward reads the clone's output and rstd; the
// forward's norm keeps its forward readers.
// NORM: %[[Y:.+]], %[[R:.+]] = braid.rms_norm %[[X:[0-9]+]], %arg17 {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<forward>
// NORM: braid.linear %[[Y]], %arg18
// NORM: braid.swiglu_grad_input
// NORM: braid.linear_grad_input
// NORM-NEXT: %[[Y2:.+]], %[[R2:.+]] = braid.rms_norm %[[X]], %arg17 {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// NORM-NEXT: braid.linear_grad_weight %{{.+}}, %[[Y2]]
// NORM: braid.rms_norm_grad_input %{{.+}}, %[[X]], %arg17, %[[R2]]
// NORM-NOT: %[[R]]

// Selective: the attention core runs again before the first backward op
// that reads it (o_proj's weight gradient reads its output), and its
// gradient reads the clone's probabilities.
// SEL: %[[O:.+]], %[[P:.+]] = braid.attention {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<forward>
// SEL: %[[O2:.+]], %[[P2:.+]] = braid.attention {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// SEL-NEXT: braid.linear_grad_weight %{{.+}}, %[[O2]]
// SEL-NEXT: braid.attention_grad_input {{.*}}, %[[P2]] {
// SEL-NOT: %[[P]]
// SEL: braid.recomputed
// SEL-NOT: braid.recomputed
// SEL: return

// Full: each layer's forward runs again from the layer's input before its
// backward (its output, the next layer's input, is kept and not cloned).
// The down projection's input gradient reads no activation, so the clones
// come right after it.
// FULL: braid.rms_norm_grad_weight {{.*}}braid.layer = #braid.layer<loss>
// FULL-NEXT: braid.linear_grad_input %{{.+}}, %arg20 {braid.layer = #braid.layer<1>
// FULL-NEXT: braid.rms_norm {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// FULL: braid.attention {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// FULL: braid.swiglu {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// FULL-NOT: braid.add {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// FULL: braid.swiglu_grad_input {{.*}}braid.layer = #braid.layer<1>
// FULL: braid.rms_norm {{.*}}braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>, braid.recomputed

// Block-1: the first layer only.
// BLOCK-NOT: braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// BLOCK: braid.layer<0>, braid.phase = #braid.phase<input_grad>, braid.recomputed

// NONE-NOT: braid.recomputed

// BAD: braid-recompute: 'softmax' is not a recompute policy or an op kind
// STAGES: braid-recompute: 'full|none' gives 2 policies separated by '|' for 1 pipeline rank and 1 stage; give one for all, one per pipeline rank, or one per stage in model order

// At PP 2 (layers 0-1 and 2-3): full on the first stage, selective on the
// second, which recomputes only its attention cores.
// PERSTAGE-NOT: braid.layer<2>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PERSTAGE: braid.attention {{.*}}braid.layer = #braid.layer<3>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PERSTAGE-NOT: braid.rms_norm {{.*}}braid.layer = #braid.layer<{{[23]}}>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PERSTAGE: braid.attention {{.*}}braid.layer = #braid.layer<2>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PERSTAGE: braid.rms_norm {{.*}}braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PERSTAGE: braid.rms_norm {{.*}}braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// Block-1 at PP 2: the first layer of each stage.
// PPBLOCK-NOT: braid.layer<3>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PPBLOCK: braid.layer<2>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PPBLOCK-NOT: braid.layer<1>, braid.phase = #braid.phase<input_grad>, braid.recomputed
// PPBLOCK: braid.layer<0>, braid.phase = #braid.phase<input_grad>, braid.recomputed
module {}

// Auto under a budget of 0.00586 GiB (6,292,127 bytes; none plans
// 8,566,016): of 9 candidates it planned 6, in the order of their FLOPs,
// and the cheapest that fits is the attention core, the norms and SwiGLU
// recomputed in both layers: 8 clones. The module records the choice for
// the memory report.
// AUTO: braid.recompute_report = [{arena_without = 8566016 : i64, candidates = 9 : i64, flops = {{.*}}, forward_flops = {{.*}}, planned = 6 : i64, policy = "selective,norm,activation"}]
// AUTO-COUNT-8: braid.recomputed
// AUTO-NOT: braid.recomputed

// NOBUDGET: error: braid-recompute: auto chooses under a memory budget; set compile.memory_budget_gb in the spec or braidc --memory-budget-gb (GiB per rank)
