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

LogicalResult LinearCrossEntropyWithGradOp::verify() {
  if (failed(verifyHead(*this, getInput(), getWeight(), getLabels(),
                        Value(), /*chunk=*/1)) ||
      failed(expectLike(*this, getInputGrad(), getInput(), "input gradient",
                        "input")) ||
      failed(expectShape(*this, getWeightGrad(), shapeOf(getWeight()),
                         "weight gradient")) ||
      failed(expectWeightGradType(*this, getWeightGrad(), getInput(),
                                  "weight gradient", "input")) ||
      failed(expectRank(*this, getWorkspace(), 2, "workspace")))
    return failure();
  int64_t rows = 1;
  for (int64_t d : leading(getInput()))
    rows *= d;
  auto ws = shapeOf(getWorkspace());
  if (ws[1] != shapeOf(getWeight())[0] || ws[0] < 1 || ws[0] > rows)
    return emitOpError() << "workspace has shape " << shapeStr(ws)
                         << ", expected [R, " << shapeOf(getWeight())[0]
                         << "] with 1 <= R <= " << rows << " (the rows)";
  return success();
}
