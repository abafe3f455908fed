// cross_entropy and cross_entropy_grad_input: mean softmax cross-entropy of
// logits [..., V] against integer labels.
//
// Forward computes each row's logsumexp (saved for backward) in parallel,
// then sums the per-row losses in double, in row order, on the calling
// thread: the loss has the same bits for every thread count. Labels are in
// [0, V) by the data loader's contract; a label outside it contributes no
// target logit (loss lse, gradient without the one-hot term) rather than
// reading outside the row.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

absl::Status checkLogitsAndLabels(const LaunchChecker &c, const Operand &logits,
                                  const Operand &labels) {
  BRAID_KERNEL_TRY(c.dtype(logits, DType::kF32));
  BRAID_KERNEL_TRY(c.dtype(labels, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(logits, 1, "[..., V]"));
  if (logits.lastDim() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                "; the vocabulary V must not be empty"));
  if (logits.desc->rows() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                " with no rows; the mean loss of no tokens is "
                                "undefined"));
  return c.shape(labels, leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

absl::Status checkCrossEntropy(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "lse"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.dtype(c.out(0), DType::kF32));
  BRAID_KERNEL_TRY(c.dtype(c.out(1), DType::kF32));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return c.shape(c.out(1), leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

bool validLabel(int32_t label, int64_t v) { return label >= 0 && label < v; }

// lse of rows [r0, r1) of logits [..., v]; `e` holds v floats.
BRAID_VECTOR_CLONES
void logSumExpRows(const float *logits, int64_t v, int64_t r0, int64_t r1,
                   float *e, float *lse) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *row = logits + r * v;
    const float m = maxOf(row, v);
    expShiftScale(row, m, 1.0f, e, v);
    lse[r] = m + std::log(sum(e, v));
  }
}

void runCrossEntropy(const KernelArgs &args) {
  const float *logits = args.ins[0].f32();
  const int32_t *labels = args.ins[1].i32();
  float *lse = args.outs[1].f32();
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    logSumExpRows(logits, v, r0, r1, threadScratch(0, v), lse);
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double target =
        validLabel(labels[r], v) ? logits[r * v + labels[r]] : 0.0;
    total += static_cast<double>(lse[r]) - target;
  }
  args.outs[0].f32()[0] = static_cast<float>(total / static_cast<double>(rows));
}

absl::Status checkCrossEntropyGradInput(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels", "lse"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.dtype(c.in(2), DType::kF32));
  BRAID_KERNEL_TRY(c.shape(c.in(2), leadingDims(*logits.desc),
                           "(the leading dimensions of logits)"));
  BRAID_KERNEL_TRY(c.dtype(c.out(0), DType::kF32));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), logits));
  return c.floatParam("scale").status();
}

// dlogits = factor * (softmax - onehot(label)) for rows [r0, r1).
BRAID_VECTOR_CLONES
void softmaxMinusOnehotRows(const float *logits, const int32_t *labels,
                            const float *lse, int64_t v, float factor,
                            int64_t r0, int64_t r1, float *dlogits) {
  for (int64_t r = r0; r < r1; ++r) {
    float *d = dlogits + r * v;
    expShiftScale(logits + r * v, lse[r], factor, d, v);
    if (validLabel(labels[r], v))
      d[labels[r]] -= factor;
  }
}

// dlogits = scale * (softmax - onehot(label)) / rows.
void runCrossEntropyGradInput(const KernelArgs &args) {
  const float *logits = args.ins[0].f32();
  const int32_t *labels = args.ins[1].i32();
  const float *lse = args.ins[2].f32();
  float *dlogits = args.outs[0].f32();
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  const float factor = static_cast<float>(paramsOf(args).floatOr("scale", 1.0) /
                                          static_cast<double>(rows));
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    softmaxMinusOnehotRows(logits, labels, lse, v, factor, r0, r1, dlogits);
  });
}

} // namespace

absl::Status registerCrossEntropyKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"cross_entropy", Device::kCPU, checkCrossEntropy, runCrossEntropy},
          {"cross_entropy_grad_input", Device::kCPU, checkCrossEntropyGradInput,
           runCrossEntropyGradInput},
      });
}

} // namespace braid::cpu
