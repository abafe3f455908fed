//===- FusedLossOps.cpp - verifiers of the fused loss ops -----------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

using namespace mlir;
using namespace braid;
using namespace braid::verify;

namespace {

// x [..., D], w [V, D] of one element type, labels [...], lse [...] (when
// given) and a positive chunk.
LogicalResult verifyHead(Operation *op, Value x, Value w, Value labels,
                         Value lse, int64_t chunk) {
  if (failed(expectRank(op, w, 2, "weight")) ||
      failed(expectMinRank(op, x, 1, "input")) ||
      failed(expectSameElementType(op, w, x, "weight", "input")))
    return failure();
  if (lastDim(x) != shapeOf(w)[1])
    return op->emitOpError() << "input features " << lastDim(x)
                             << " do not match weight in-features "
                             << shapeOf(w)[1];
  if (shapeOf(w)[0] == 0)
    return op->emitOpError("the vocabulary (weight rows) must not be empty");
  if (failed(expectShape(op, labels, leading(x), "labels")) ||
      (lse && failed(expectShape(op, lse, leading(x), "lse"))))
    return failure();
  if (chunk <= 0)
    return op->emitOpError("chunk must be positive");
  return success();
}

} // namespace

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyHead(*this, getInput(), getWeight(), getLabels(), getLse(),
                    getChunk());
}

namespace {

// dx like x, dW like W (a weight gradient's type), and a workspace of
// [R, V] with 1 <= R <= the rows of x.
LogicalResult verifyHeadGrads(Operation *op, Value x, Value w, Value dx,
                              Value dw, Value workspace) {
  if (failed(expectLike(op, dx, x, "input gradient", "input")) ||
      failed(expectShape(op, dw, shapeOf(w), "weight gradient")) ||
      failed(expectWeightGradType(op, dw, x, "weight gradient", "input")) ||
      failed(expectRank(op, workspace, 2, "workspace")))
    return failure();
  int64_t rows = 1;
  for (int64_t d : leading(x))
    rows *= d;
  auto ws = shapeOf(workspace);
  if (ws[1] != shapeOf(w)[0] || ws[0] < 1 || ws[0] > rows)
    return op->emitOpError()
           << "workspace has shape " << shapeStr(ws) << ", expected [R, "
           << shapeOf(w)[0] << "] with 1 <= R <= " << rows << " (the rows)";
  return success();
}

} // namespace

LogicalResult LinearCrossEntropyWithGradOp::verify() {
  if (failed(verifyHead(*this, getInput(), getWeight(), getLabels(),
                        Value(), /*chunk=*/1)))
    return failure();
  return verifyHeadGrads(*this, getInput(), getWeight(), getInputGrad(),
                         getWeightGrad(), getWorkspace());
}

LogicalResult LinearCrossEntropyStatsOp::verify() {
  if (failed(verifyHead(*this, getInput(), getWeight(), getLabels(), Value(),
                        getChunk())))
    return failure();
  return expectShape(*this, getStats(), append(leading(getInput()), 3),
                     "stats");
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyHead(*this, getInput(), getWeight(), getLabels(), getLse(),
                        /*chunk=*/1)))
    return failure();
  return verifyHeadGrads(*this, getInput(), getWeight(), getInputGrad(),
                         getWeightGrad(), getWorkspace());
}
