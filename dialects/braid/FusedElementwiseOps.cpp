//===- FusedElementwiseOps.cpp - verifiers of the fused elementwise ops -----------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

using namespace mlir;
using namespace braid;
using namespace braid::verify;

// The residual add of an add+norm: branch, sum and normalised result have
// the residual's shape and type; `p` is a dropout probability.
static LogicalResult verifyAddNorm(Operation *op, Value residual, Value branch,
                                   Value sum, Value result, double eps,
                                   double p) {
  if (failed(verifyPositive(op, eps, "eps")) ||
      failed(verifyProbability(op, p, "p")) ||
      failed(expectMinRank(op, residual, 1, "residual")) ||
      failed(expectLike(op, branch, residual, "branch", "residual")) ||
      failed(expectLike(op, sum, residual, "sum", "residual")))
    return failure();
  return expectLike(op, result, residual, "result", "residual");
}

LogicalResult FusedAddRMSNormOp::verify() {
  Value r = getResidual();
  if (failed(verifyAddNorm(*this, r, getBranch(), getSum(), getResult(),
                           getEps().convertToDouble(),
                           getP().convertToDouble())) ||
      failed(verifyNormVector(*this, r, getWeight(), "weight")))
    return failure();
  return expectShape(*this, getRstd(), leading(r), "rstd");
}

LogicalResult FusedAddLayerNormOp::verify() {
  Value r = getResidual();
  if (failed(verifyAddNorm(*this, r, getBranch(), getSum(), getResult(),
                           getEps().convertToDouble(),
                           getP().convertToDouble())) ||
      failed(verifyNormVector(*this, r, getWeight(), "weight")) ||
      failed(verifyNormVector(*this, r, getBias(), "bias")) ||
      failed(expectShape(*this, getMean(), leading(r), "mean")))
    return failure();
  return expectShape(*this, getRstd(), leading(r), "rstd");
}

// The operands every add+norm input gradient shares.
static LogicalResult verifyAddNormGrad(Operation *op, Value grad, Value x,
                                       Value weight, Value residualGrad,
                                       Value inputGrad) {
  if (failed(expectMinRank(op, x, 1, "input")) ||
      failed(expectLike(op, grad, x, "gradient", "input")) ||
      failed(verifyNormVector(op, x, weight, "weight")) ||
      failed(expectLike(op, residualGrad, x, "residual gradient", "input")))
    return failure();
  return expectLike(op, inputGrad, x, "input gradient", "input");
}

LogicalResult FusedAddRMSNormGradInputOp::verify() {
  Value x = getInput();
  if (failed(verifyAddNormGrad(*this, getGrad(), x, getWeight(),
                               getResidualGrad(), getInputGrad())))
    return failure();
  return expectShape(*this, getRstd(), leading(x), "rstd");
}

LogicalResult FusedAddLayerNormGradInputOp::verify() {
  Value x = getInput();
  if (failed(verifyAddNormGrad(*this, getGrad(), x, getWeight(),
                               getResidualGrad(), getInputGrad())) ||
      failed(expectShape(*this, getMean(), leading(x), "mean")))
    return failure();
  return expectShape(*this, getRstd(), leading(x), "rstd");
}

// A bias is a vector over the last dimension of `input`, of its type.
static LogicalResult verifyRowBias(Operation *op, Value input, Value bias) {
  if (failed(expectMinRank(op, input, 1, "input")) ||
      failed(expectSameElementType(op, bias, input, "bias", "input")))
    return failure();
  return expectShape(op, bias, {lastDim(input)}, "bias");
}

LogicalResult FusedBiasGeLUOp::verify() {
  if (failed(verifyRowBias(*this, getInput(), getBias())))
    return failure();
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

LogicalResult FusedBiasGeLUGradInputOp::verify() {
  if (failed(verifyRowBias(*this, getInput(), getBias())) ||
      failed(expectLike(*this, getGrad(), getInput(), "gradient", "input")))
    return failure();
  return expectLike(*this, getInputGrad(), getInput(), "input gradient",
                    "input");
}

LogicalResult FusedBiasDropoutAddOp::verify() {
  if (failed(verifyProbability(*this, getP().convertToDouble(), "p")) ||
      failed(verifyRowBias(*this, getInput(), getBias())) ||
      failed(expectLike(*this, getResidual(), getInput(), "residual",
                        "input")))
    return failure();
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

LogicalResult FusedBiasSwiGLUOp::verify() {
  if (failed(expectLike(*this, getUp(), getGate(), "up", "gate")) ||
      failed(verifyRowBias(*this, getGate(), getGateBias())) ||
      failed(verifyRowBias(*this, getUp(), getUpBias())))
    return failure();
  return expectLike(*this, getResult(), getGate(), "result", "gate");
}

LogicalResult FusedBiasSwiGLUGradInputOp::verify() {
  if (failed(expectLike(*this, getUp(), getGate(), "up", "gate")) ||
      failed(verifyRowBias(*this, getGate(), getGateBias())) ||
      failed(verifyRowBias(*this, getUp(), getUpBias())) ||
      failed(expectLike(*this, getGrad(), getGate(), "gradient", "gate")) ||
      failed(expectLike(*this, getGateGrad(), getGate(), "gate gradient",
                        "gate")))
    return failure();
  return expectLike(*this, getUpGrad(), getGate(), "up gradient", "gate");
}

LogicalResult FusedLinearRoPEOp::verify() {
  Value w = getWeight(), x = getInput();
  if (failed(expectRank(*this, w, 2, "weight")) ||
      failed(expectRank(*this, x, 3, "input")) ||
      failed(expectSameElementType(*this, w, x, "weight", "input")))
    return failure();
  if (lastDim(x) != shapeOf(w)[1])
    return emitOpError() << "input features " << lastDim(x)
                         << " do not match weight in-features "
                         << shapeOf(w)[1];
  if (Value b = getBias())
    if (failed(expectShape(*this, b, {shapeOf(w)[0]}, "bias")) ||
        failed(expectSameElementType(*this, b, w, "bias", "weight")))
      return failure();
  if (failed(expectSameElementType(*this, getResult(), x, "result", "input")) ||
      failed(expectShape(*this, getResult(), append(leading(x), shapeOf(w)[0]),
                         "result")))
    return failure();
  return verifyRoPE(*this, getResult(), getResult(), getNumHeads(),
                    getTheta().convertToDouble(), "result", "result");
}

LogicalResult FusedLinearRoPEGradInputOp::verify() {
  Value w = getWeight(), dy = getGrad();
  if (failed(expectRank(*this, w, 2, "weight")) ||
      failed(expectSameElementType(*this, w, dy, "weight", "gradient")) ||
      failed(verifyRoPE(*this, dy, getLinearGrad(), getNumHeads(),
                        getTheta().convertToDouble(), "gradient",
                        "linear gradient")))
    return failure();
  if (lastDim(dy) != shapeOf(w)[0])
    return emitOpError() << "gradient features " << lastDim(dy)
                         << " do not match weight out-features "
                         << shapeOf(w)[0];
  if (failed(expectSameElementType(*this, getInputGrad(), dy,
                                   "input gradient", "gradient")))
    return failure();
  return expectShape(*this, getInputGrad(), append(leading(dy), shapeOf(w)[1]),
                     "input gradient");
}
