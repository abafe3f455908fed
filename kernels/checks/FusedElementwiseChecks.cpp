// Checks of fused norm, activation, dropout and RoPE kernels
// (docs/fusion.md).
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

// The optional dropout of a fused kernel over `x`: `p` in [0, 1), default
// 0, `rng_offset` required when p is above 0, the optional `tp_dim`
// (checkTpDim) below `tpLimit` (x's rank when -1) and the optional `cp_dim`
// (checkCpDim) below the last dimension: these kernels draw a row of the
// last dimension as one run of whole indices, which a CP part of that
// dimension (two runs) would break.
absl::Status checkDropoutParams(const LaunchChecker &c, const Operand &x,
                                int64_t tpLimit = -1,
                                absl::string_view why = "") {
  absl::StatusOr<double> p = c.floatParamOr("p", 0.0);
  if (!p.ok())
    return p.status();
  if (*p < 0 || *p >= 1)
    return c.error(
        absl::StrCat("parameter 'p' is ", *p, ", expected 0 <= p < 1"));
  if (*p > 0)
    BRAID_KERNEL_TRY(c.intParam("rng_offset", 0, INT64_MAX).status());
  else
    BRAID_KERNEL_TRY(c.intParamOr("rng_offset", 0, 0, INT64_MAX).status());
  BRAID_KERNEL_TRY(checkTpDim(c, x, tpLimit, why));
  return checkCpDim(c, x, x.rank() - 1,
                    ": the kernel draws each row of the last dimension as one "
                    "run");
}

absl::Status checkVector(const LaunchChecker &c, const Operand &op,
                         const Operand &x) {
  BRAID_KERNEL_TRY(c.sameDtype(op, x));
  return checkNormVector(c, op, x);
}

// `op` has the dtype and the shape of `like`.
absl::Status checkLike(const LaunchChecker &c, const Operand &op,
                       const Operand &like) {
  BRAID_KERNEL_TRY(c.sameDtype(op, like));
  return c.sameShape(op, like);
}

absl::Status checkAddNorm(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "fused_add_layer_norm" : "fused_add_rms_norm", sig);
  if (layer) {
    BRAID_KERNEL_TRY(c.inputs({"residual", "x", "gamma", "beta"}));
    BRAID_KERNEL_TRY(c.outputs({"sum", "y", "mean", "rstd"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"residual", "x", "gamma"}));
    BRAID_KERNEL_TRY(c.outputs({"sum", "y", "rstd"}));
  }
  Operand r = c.in(0);
  BRAID_KERNEL_TRY(c.floatStorage(r));
  BRAID_KERNEL_TRY(checkRows(c, r));
  BRAID_KERNEL_TRY(checkLike(c, c.in(1), r));
  for (int i = 2; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkVector(c, c.in(i), r));
  BRAID_KERNEL_TRY(checkLike(c, c.out(0), r));
  BRAID_KERNEL_TRY(checkLike(c, c.out(1), r));
  for (int i = 2; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.out(i), r));
  BRAID_KERNEL_TRY(checkEps(c));
  // A norm reads whole rows: x may be a part along any dimension but D.
  return checkDropoutParams(c, c.in(1), r.rank() - 1,
                            ": the norm reads whole rows of D");
}

absl::Status checkFusedAddLayerNorm(const KernelSignature &sig) {
  return checkAddNorm(sig, true);
}
absl::Status checkFusedAddRmsNorm(const KernelSignature &sig) {
  return checkAddNorm(sig, false);
}

absl::Status checkAddNormGrad(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "fused_add_layer_norm_grad_input"
                        : "fused_add_rms_norm_grad_input",
                  sig);
  if (layer)
    BRAID_KERNEL_TRY(
        c.inputs({"dy", "x", "gamma", "mean", "rstd", "dresidual"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "gamma", "rstd", "dresidual"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  Operand x = c.in(1);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(checkRows(c, x));
  BRAID_KERNEL_TRY(checkLike(c, c.in(0), x));
  BRAID_KERNEL_TRY(checkVector(c, c.in(2), x));
  const int last = c.numIns() - 1;
  for (int i = 3; i < last; ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.in(i), x));
  BRAID_KERNEL_TRY(checkLike(c, c.in(last), x));
  return checkLike(c, c.out(0), x);
}

absl::Status checkFusedAddLayerNormGradInput(const KernelSignature &sig) {
  return checkAddNormGrad(sig, true);
}
absl::Status checkFusedAddRmsNormGradInput(const KernelSignature &sig) {
  return checkAddNormGrad(sig, false);
}

// h [..., M] and its bias b [M], of one dtype.
absl::Status checkBiased(const LaunchChecker &c, const Operand &h,
                         const Operand &b) {
  BRAID_KERNEL_TRY(c.floatStorage(h));
  BRAID_KERNEL_TRY(c.minRank(h, 1, "[..., M]"));
  BRAID_KERNEL_TRY(c.sameDtype(b, h));
  return c.shape(b, {h.lastDim()}, "([M], h's last dimension)");
}

absl::Status checkFusedBiasGelu(const KernelSignature &sig) {
  LaunchChecker c("fused_bias_gelu", sig);
  BRAID_KERNEL_TRY(c.inputs({"h", "b"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(0), c.in(1)));
  return checkLike(c, c.out(0), c.in(0));
}

absl::Status checkFusedBiasGeluGradInput(const KernelSignature &sig) {
  LaunchChecker c("fused_bias_gelu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "h", "b"}));
  BRAID_KERNEL_TRY(c.outputs({"dh"}));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(1), c.in(2)));
  BRAID_KERNEL_TRY(checkLike(c, c.in(0), c.in(1)));
  return checkLike(c, c.out(0), c.in(1));
}

absl::Status checkFusedBiasDropoutAdd(const KernelSignature &sig) {
  LaunchChecker c("fused_bias_dropout_add", sig);
  BRAID_KERNEL_TRY(c.inputs({"h", "b", "residual"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(0), c.in(1)));
  BRAID_KERNEL_TRY(checkLike(c, c.in(2), c.in(0)));
  BRAID_KERNEL_TRY(checkLike(c, c.out(0), c.in(0)));
  return checkDropoutParams(c, c.in(0));
}

absl::Status checkFusedBiasSwiglu(const KernelSignature &sig) {
  LaunchChecker c("fused_bias_swiglu", sig);
  BRAID_KERNEL_TRY(c.inputs({"gate", "up", "gate_bias", "up_bias"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(0), c.in(2)));
  BRAID_KERNEL_TRY(checkLike(c, c.in(1), c.in(0)));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(1), c.in(3)));
  return checkLike(c, c.out(0), c.in(0));
}

absl::Status checkFusedBiasSwigluGradInput(const KernelSignature &sig) {
  LaunchChecker c("fused_bias_swiglu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "gate", "up", "gate_bias", "up_bias"}));
  BRAID_KERNEL_TRY(c.outputs({"dgate", "dup"}));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(1), c.in(3)));
  BRAID_KERNEL_TRY(checkLike(c, c.in(0), c.in(1)));
  BRAID_KERNEL_TRY(checkLike(c, c.in(2), c.in(1)));
  BRAID_KERNEL_TRY(checkBiased(c, c.in(2), c.in(4)));
  BRAID_KERNEL_TRY(checkLike(c, c.out(0), c.in(1)));
  return checkLike(c, c.out(1), c.in(1));
}

// num_heads and theta of a RoPE over `y` [B, S, H*Dh], as rope checks them.
absl::Status checkRopeParams(const LaunchChecker &c, const Operand &y) {
  BRAID_KERNEL_TRY(c.rank(y, 3, "[B, S, H*Dh]"));
  return checkRopeHeads(c, y);
}

absl::Status checkFusedLinearRope(const KernelSignature &sig) {
  LaunchChecker c("fused_linear_rope", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "w", "b"}, /*numOptional=*/1));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand x = c.in(0), w = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(c.sameDtype(w, x));
  BRAID_KERNEL_TRY(c.sameDtype(y, x));
  BRAID_KERNEL_TRY(c.rank(x, 3, "[B, S, K]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  BRAID_KERNEL_TRY(c.shape(w, {w.dim(0), x.dim(2)}, "(x's last dimension K)"));
  if (c.numIns() == 3) {
    BRAID_KERNEL_TRY(c.sameDtype(c.in(2), x));
    BRAID_KERNEL_TRY(c.shape(c.in(2), {w.dim(0)}, "([M], w's rows)"));
  }
  BRAID_KERNEL_TRY(c.shape(y, {x.dim(0), x.dim(1), w.dim(0)}, "([B, S, M])"));
  return checkRopeParams(c, y);
}

absl::Status checkFusedLinearRopeGradInput(const KernelSignature &sig) {
  LaunchChecker c("fused_linear_rope_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "w"}));
  BRAID_KERNEL_TRY(c.outputs({"dx", "dlinear"}));
  Operand dy = c.in(0), w = c.in(1);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(w, dy));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), dy));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  BRAID_KERNEL_TRY(checkRopeParams(c, dy));
  BRAID_KERNEL_TRY(
      c.shape(w, {dy.dim(2), w.dim(1)}, "(dy's last dimension M rows)"));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {dy.dim(0), dy.dim(1), w.dim(1)},
                           "([B, S, K])"));
  return checkLike(c, c.out(1), dy);
}

} // namespace

absl::Span<const NamedCheck> fusedElementwiseChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"fused_add_layer_norm", checkFusedAddLayerNorm},
      {"fused_add_layer_norm_grad_input", checkFusedAddLayerNormGradInput},
      {"fused_add_rms_norm", checkFusedAddRmsNorm},
      {"fused_add_rms_norm_grad_input", checkFusedAddRmsNormGradInput},
      {"fused_bias_swiglu", checkFusedBiasSwiglu},
      {"fused_bias_swiglu_grad_input", checkFusedBiasSwigluGradInput},
      {"fused_linear_rope", checkFusedLinearRope},
      {"fused_linear_rope_grad_input", checkFusedLinearRopeGradInput},
      {"fused_bias_gelu", checkFusedBiasGelu},
      {"fused_bias_gelu_grad_input", checkFusedBiasGeluGradInput},
      {"fused_bias_dropout_add", checkFusedBiasDropoutAdd},
  };
  return kChecks;
}

} // namespace braid::checks
