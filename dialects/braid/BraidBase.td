//===- BraidBase.td - the braid dialect -------------------------*- tablegen -*-===//
//
// `braid` says *what* is computed: tensor ops at transformer granularity with
// global (logical) shapes. Forward ops come from spec import; each backward
// op is split into an input-gradient op (`*_grad_input`, "B") and, where the
// op has weights, a weight-gradient op (`*_grad_weight`, "W"), so that later
// schedules can move W work into pipeline bubbles.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_BASE_TD
#define BRAID_BASE_TD

include "mlir/IR/OpBase.td"

def Braid_Dialect : Dialect {
  let name = "braid";
  let cppNamespace = "::braid";
  let summary = "Transformer training ops: forward, input gradient, weight gradient";
  let description = [{
    Ops operate on ranked tensors of f32 or bf16 activations and i32 token
    ids. Parameters and data enter as arguments of the training-step function;
    argument attributes (`braid.param`, `braid.input`) name them.
  }];
}

class Braid_Op<string mnemonic, list<Trait> traits = []>
    : Op<Braid_Dialect, mnemonic, traits>;

// Shapes are static: every size is known when the plan is made.
// Floating-point activations and weights.
def Braid_FloatTensor : StaticShapeTensorOf<[F32, BF16]>;
// Token, label and position ids.
def Braid_IdTensor : StaticShapeTensorOf<[I32]>;
// Per-row statistics saved for backward (mean, rstd, log-sum-exp): fp32.
def Braid_StatTensor : StaticShapeTensorOf<[F32]>;
def Braid_Scalar : 0DTensorOf<[F32]>;

#endif // BRAID_BASE_TD
