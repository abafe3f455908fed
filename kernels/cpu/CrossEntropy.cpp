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
//
// Vocabulary-parallel cross-entropy (Megatron's; docs/kernels.md, "Tensor
// parallel"): each TP rank holds logits [..., V] of the vocabulary shard
// [tpRank * V, (tpRank + 1) * V). cross_entropy_stats reduces each row of
// the shard to (max m, sum of exp(x - m), target logit or 0); the ranks'
// stats are all-gathered, and cross_entropy_combine turns them into the
// whole vocabulary's lse and mean loss, in rank order, so every rank gets
// the same bits. cross_entropy_grad_input with vocab_shard then gives the
// shard's columns of the gradient from that lse. A label outside the whole
// vocabulary has no target on any rank: its row contributes its lse, as in
// cross_entropy.
#include <algorithm>
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

// The first two statistics formed as logSumExpRows forms them.
BRAID_VECTOR_CLONES
void statsRows(const float *logits, const int32_t *labels, int64_t v,
               int64_t first, int64_t r0, int64_t r1, float *e,
               float *stats) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *row = logits + r * v;
    const float m = maxOf(row, v);
    expShiftScale(row, m, 1.0f, e, v);
    const int64_t label = labels[r] - first;
    stats[3 * r] = m;
    stats[3 * r + 1] = sum(e, v);
    stats[3 * r + 2] = label >= 0 && label < v ? row[label] : 0.0f;
  }
}

namespace {

bool validLabel(int64_t label, int64_t v) { return label >= 0 && label < v; }

// The vocabulary id of column 0 of logits [..., v]: tpRank * v for a
// vocab_shard launch and for cross_entropy_stats, else 0.
int64_t firstColumnOf(const KernelArgs &args, int64_t v, bool sharded) {
  return sharded ? contextOf(args).tpRank * v : 0;
}

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

template <typename T> void runCrossEntropyStats(const KernelArgs &args) {
  const T *logits = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[1].i32();
  float *stats = args.outs[0].f32();
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  const int64_t first = firstColumnOf(args, v, true);
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    float *e = threadScratch(0, v);
    if constexpr (std::is_same_v<T, float>) {
      statsRows(logits, labels, v, first, r0, r1, e, stats);
    } else {
      float *row = threadScratch(1, v);
      for (int64_t r = r0; r < r1; ++r) {
        convert(logits + r * v, row, v);
        statsRows(row, labels + r, v, first, 0, 1, e, stats + 3 * r);
      }
    }
  });
}

// stats_all [P * d0, ..., 3] holds rank p's stats of row r at p * rows + r.
// lse = M + log(sum_p s_p exp(m_p - M)), M = max_p m_p, in double over the
// ranks in order, then rounded once; the loss is cross_entropy's sum, in
// row order, of lse - target, the target being the ranks' t summed in
// order (at most one is not 0).
void runCrossEntropyCombine(const KernelArgs &args) {
  const float *stats = args.ins[0].f32();
  const int64_t rows = args.ins[1].numel();
  const int64_t ranks = args.ins[0].desc->shape[0] / args.ins[1].desc->shape[0];
  float *lse = args.outs[1].f32();
  parallelFor(poolOf(args), rows, rowGrain(ranks), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      double m = stats[3 * r];
      for (int64_t p = 1; p < ranks; ++p)
        m = std::max<double>(m, stats[3 * (p * rows + r)]);
      double total = 0;
      for (int64_t p = 0; p < ranks; ++p) {
        const float *st = stats + 3 * (p * rows + r);
        total += static_cast<double>(st[1]) * std::exp(st[0] - m);
      }
      lse[r] = static_cast<float>(m + std::log(total));
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double target = 0;
    for (int64_t p = 0; p < ranks; ++p)
      target += stats[3 * (p * rows + r) + 2];
    total += static_cast<double>(lse[r]) - target;
  }
  args.outs[0].f32()[0] = static_cast<float>(total / static_cast<double>(rows));
}

// dlogits = factor * (softmax - onehot(label)) for rows [r0, r1), the
// label's column being label - first.
BRAID_VECTOR_CLONES
void softmaxMinusOnehotRows(const float *logits, const int32_t *labels,
                            const float *lse, int64_t v, int64_t first,
                            float factor, int64_t r0, int64_t r1,
                            float *dlogits) {
  for (int64_t r = r0; r < r1; ++r) {
    float *d = dlogits + r * v;
    expShiftScale(logits + r * v, lse[r], factor, d, v);
    const int64_t label = labels[r] - first;
    if (validLabel(label, v))
      d[label] -= factor;
  }
}

// dlogits = scale * (softmax - onehot(label)) / rows. With vocab_shard the
// logits are the TP rank's vocabulary shard and lse the whole vocabulary's
// (cross_entropy_combine): the result is the shard's columns of the whole
// gradient.
template <typename T> void runCrossEntropyGradInput(const KernelArgs &args) {
  const T *logits = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[1].i32();
  const float *lse = args.ins[2].f32();
  T *dlogits = dataOf<T>(args.outs[0]);
  const int64_t v = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  const float factor = static_cast<float>(paramsOf(args).floatOr("scale", 1.0) /
                                          static_cast<double>(rows));
  const int64_t first = firstColumnOf(
      args, v, paramsOf(args).intOr("vocab_shard", 0) != 0);
  parallelFor(poolOf(args), rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      softmaxMinusOnehotRows(logits, labels, lse, v, first, factor, r0, r1,
                             dlogits);
    } else {
      float *row = threadScratch(0, v), *d = threadScratch(1, v);
      for (int64_t r = r0; r < r1; ++r) {
        convert(logits + r * v, row, v);
        softmaxMinusOnehotRows(row, labels + r, lse + r, v, first, factor, 0,
                               1, d);
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
                         {"cross_entropy_stats",
                          byStorage<runCrossEntropyStats<float>,
                                    runCrossEntropyStats<Bf16>>},
                         {"cross_entropy_combine", runCrossEntropyCombine},
                     });
}

} // namespace braid::cpu
