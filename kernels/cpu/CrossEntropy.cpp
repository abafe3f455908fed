// cross_entropy and cross_entropy_grad_input: mean softmax cross-entropy of
// logits [..., V] against integer labels.
//
// Forward computes each row's logsumexp (saved for backward) in parallel,
// then sums the per-row losses in double, in row order, on the calling
// thread: the loss has the same bits for every thread count. Labels are in
// [0, V) by the data loader's contract; a label outside it contributes no
// target logit (loss lse, gradient without the one-hot term) rather than
// reading outside the row.
//
// bf16 logits are widened row by row; the loss and lse stay f32 and the
// gradient is rounded once per element.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/SharedLoops.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {

// SharedLoops.h: defined once, so that its instruction-set clones have one
// resolver.
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

namespace {

bool validLabel(int32_t label, int64_t v) { return label >= 0 && label < v; }

template <typename T> void runCrossEntropy(const KernelArgs &args) {
  const T *logits = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[1].i32();
  float *lse = args.outs[1].f32();
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    float *e = threadScratch(0, v);
    if constexpr (std::is_same_v<T, float>) {
      logSumExpRows(logits, v, r0, r1, e, lse);
    } else {
      float *row = threadScratch(1, v);
      for (int64_t r = r0; r < r1; ++r) {
        convert(logits + r * v, row, v);
        logSumExpRows(row, v, 0, 1, e, lse + r);
      }
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double target =
        validLabel(labels[r], v) ? load(logits, r * v + labels[r]) : 0.0;
    total += static_cast<double>(lse[r]) - target;
  }
  args.outs[0].f32()[0] = static_cast<float>(total / static_cast<double>(rows));
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
template <typename T> void runCrossEntropyGradInput(const KernelArgs &args) {
  const T *logits = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[1].i32();
  const float *lse = args.ins[2].f32();
  T *dlogits = dataOf<T>(args.outs[0]);
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  const float factor = static_cast<float>(paramsOf(args).floatOr("scale", 1.0) /
                                          static_cast<double>(rows));
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      softmaxMinusOnehotRows(logits, labels, lse, v, factor, r0, r1, dlogits);
    } else {
      float *row = threadScratch(0, v), *d = threadScratch(1, v);
      for (int64_t r = r0; r < r1; ++r) {
        convert(logits + r * v, row, v);
        softmaxMinusOnehotRows(row, labels + r, lse + r, v, factor, 0, 1, d);
        convert(d, dlogits + r * v, v);
      }
    }
  });
}

} // namespace

absl::Status registerCrossEntropyKernels(KernelRegistry &registry) {
  return registerAll(registry,
                     {
                         {"cross_entropy", byStorage<runCrossEntropy<float>,
                                                     runCrossEntropy<Bf16>>},
                         {"cross_entropy_grad_input",
                          byStorage<runCrossEntropyGradInput<float>,
                                    runCrossEntropyGradInput<Bf16>>},
                     });
}

} // namespace braid::cpu
