// The kernels of a mixture-of-experts layer (docs/moe.md, docs/kernels.md).
// moe_route and moe_route_grad: the router, one token row at a time with
// the arithmetic of kernels/common/MoeRoute.h, which the CUDA kernels
// share; f32 in every plan, so the choice does not hang on bf16 rounding.
// moe_permute and moe_unpermute (and their gradients): the tokens' rows
// into expert-major order (kernels/common/MoePermute.h) and the experts'
// outputs back, weighted, each token's choices summed in choice order.
// moe_scores, moe_topk, moe_sort, moe_gather, moe_gather_choices and
// moe_weighted_sum (and gradients): the same, unfused (braid-fuse-moe),
// with the same arithmetic, so fused and unfused give the same bits.
// moe_expert_counts, moe_aux_loss, moe_z_loss and their gradients: the
// balancing losses (kernels/common/MoeBalance.h), the losses summed over
// the rows in order on one thread. moe_hot_experts, moe_split_rows and
// moe_merge_rows: hot-expert replication under expert parallel
// (kernels/common/MoeReplicate.h). Every output element is computed by
// one thread in one order, so the bits do not depend on the number of
// threads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/common/MoeBalance.h"
#include "kernels/common/MoePermute.h"
#include "kernels/common/MoeReplicate.h"
#include "kernels/common/MoeRoute.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"

namespace braid::cpu {
namespace {

moe::RouteParams routeParams(const KernelArgs &args) {
  const KernelParams &p = paramsOf(args);
  return {static_cast<int>(p.intOr("sigmoid", 0) != 0),
          static_cast<int>(p.intOr("normalize", 0) != 0),
          static_cast<float>(p.floatOr("scale", 1.0))};
}

// The rows [..., E] of a launch's first input: (N, E).
std::pair<int64_t, int64_t> rowsAndExperts(const TensorView &v) {
  const int64_t e = v.desc->lastDim();
  return {e == 0 ? 0 : v.numel() / e, e};
}

void runMoeRoute(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const int64_t k = args.outs[0].desc->lastDim();
  const float *logits = args.ins[0].f32();
  const float *bias = args.ins.size() > 1 ? args.ins[1].f32() : nullptr;
  int32_t *experts = args.outs[0].i32();
  float *weights = args.outs[1].f32(), *scores = args.outs[2].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e * k), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::routeRow(logits + r * e, bias, e, k, p, scores + r * e,
                    experts + r * k, weights + r * k);
  });
}

void runMoeRouteGrad(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[1]);
  const int64_t k = args.ins[0].desc->lastDim();
  const float *dweights = args.ins[0].f32(), *scores = args.ins[1].f32();
  const int32_t *experts = args.ins[2].i32();
  const float *dscores = args.ins.size() > 3 ? args.ins[3].f32() : nullptr;
  float *dlogits = args.outs[0].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::routeGradRow(dweights + r * k, scores + r * e, experts + r * k, e, k,
                        p, dscores ? dscores + r * e : nullptr,
                        dlogits + r * e);
  });
}

// The unfused router (docs/fusion.md, braid-fuse-moe): the same rows'
// functions as moe_route's, one after the other.
void runMoeScores(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const float *logits = args.ins[0].f32();
  float *scores = args.outs[0].f32();
  const int sigmoid = routeParams(args).sigmoid;
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::scoresRow(logits + r * e, e, sigmoid, scores + r * e);
  });
}

void runMoeScoresGrad(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[1]);
  const float *dscores = args.ins[0].f32(), *scores = args.ins[1].f32();
  float *dlogits = args.outs[0].f32();
  const int sigmoid = routeParams(args).sigmoid;
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::scoresGradRow(dscores + r * e, scores + r * e, e, sigmoid,
                         dlogits + r * e);
  });
}

void runMoeTopK(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const int64_t k = args.outs[0].desc->lastDim();
  const float *scores = args.ins[0].f32();
  const float *bias = args.ins.size() > 1 ? args.ins[1].f32() : nullptr;
  int32_t *experts = args.outs[0].i32();
  float *weights = args.outs[1].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e * k), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::topkRow(scores + r * e, bias, e, k, p, experts + r * k,
                   weights + r * k);
  });
}

void runMoeTopKGrad(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[1]);
  const int64_t k = args.ins[0].desc->lastDim();
  const float *dweights = args.ins[0].f32(), *scores = args.ins[1].f32();
  const int32_t *experts = args.ins[2].i32();
  float *dscores = args.outs[0].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      zero(dscores + r * e, e);
      moe::addTopkGradRow(dweights + r * k, scores + r * e, experts + r * k, e,
                          k, p, dscores + r * e);
    }
  });
}

void runMoeBlockCounts(const KernelArgs &args) {
  moe::blockCounts(args.ins[0].i32(), args.outs[0].numel(),
                   args.outs[0].i32());
}

// The group's size G from the shapes: counts G x G x m, offsets G x m + 1.
void runMoeEpOffsets(const KernelArgs &args) {
  const int64_t blocks = args.outs[0].numel() - 1;
  const int64_t ranks = args.ins[0].numel() / blocks;
  moe::exchangeOffsets(args.ins[0].i32(), ranks, blocks / ranks,
                       contextOf(args).epRank, args.outs[0].i32());
}

void runMoeExpertCounts(const KernelArgs &args) {
  moe::countExperts(args.ins[0].i32(), args.ins[0].numel(),
                    args.outs[0].numel(), args.outs[0].f32());
}

double auxFactor(const KernelArgs &args, int64_t n, int64_t e) {
  const KernelParams &p = paramsOf(args);
  return moe::auxFactor(p.floatOr("coeff", 0.0), e, p.intOr("top_k", 1), n,
                        p.intOr("parts", 1));
}

// The rows summed in order in double: the same bits on any thread count.
void runMoeAuxLoss(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const int sigmoid = paramsOf(args).intOr("sigmoid", 0) != 0;
  args.outs[0].f32()[0] = static_cast<float>(
      auxFactor(args, n, e) *
      moe::auxSum(args.ins[0].f32(), args.ins[1].f32(), n, e, sigmoid));
}

void runMoeAuxLossGrad(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const float *scores = args.ins[0].f32(), *counts = args.ins[1].f32();
  const int sigmoid = paramsOf(args).intOr("sigmoid", 0) != 0;
  const double factor =
      auxFactor(args, n, e) * paramsOf(args).floatOr("scale", 1.0);
  float *dscores = args.outs[0].f32();
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::auxGradRow(scores + r * e, counts, e, sigmoid, factor,
                      dscores + r * e);
  });
}

// The bias moves unless the step is skipped (skip != 0).
void runMoeBiasUpdate(const KernelArgs &args) {
  if (args.ins[1].f32()[0] != 0.0f)
    return;
  moe::biasUpdate(args.ins[0].f32(), args.outs[0].numel(),
                  paramsOf(args).floatOr("rate", 0.0), args.outs[0].f32());
}

void runMoeZLoss(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  args.outs[0].f32()[0] =
      static_cast<float>(moe::zFactor(paramsOf(args).floatOr("coeff", 0.0), n) *
                         moe::zSum(args.ins[0].f32(), n, e));
}

void runMoeZLossGrad(const KernelArgs &args) {
  const auto [n, e] = rowsAndExperts(args.ins[0]);
  const float *logits = args.ins[0].f32();
  float *dlogits = args.outs[0].f32();
  const KernelParams &p = paramsOf(args);
  const double factor =
      moe::zFactor(p.floatOr("coeff", 0.0), n) * p.floatOr("scale", 1.0);
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::zGradRow(logits + r * e, e, factor, dlogits + r * e);
  });
}

// The geometry of a permute launch: n tokens of d values, k choices each.
struct Rows {
  int64_t n = 0, d = 0, k = 0;
};

Rows rowsOf(const TensorView &x, const TensorView &choices) {
  const int64_t d = x.desc->lastDim();
  return {d == 0 ? 0 : x.numel() / d, d, choices.desc->lastDim()};
}

// xs[positions[a]] = x[a / k]; the rows no assignment takes (those of
// expert ids out of range) are zero.
// With `capacity` (capacity mode), xs is [E * capacity, D]: every slot no
// assignment fills is zero, and assignments beyond an expert's capacity
// are dropped (position -1).
// The positions and offsets of the choices `experts` (moe_sort, and
// moe_permute's first step); returns the capacity (0: dropless).
int64_t sortChoices(const KernelArgs &args, const TensorView &experts,
                    const TensorView &positions, const TensorView &offsets) {
  const int64_t e = offsets.desc->shape[0] - 1;
  const int64_t capacity = paramsOf(args).intOr("capacity", 0);
  if (capacity > 0)
    moe::assignSlots(experts.i32(), experts.numel(), e, capacity,
                     positions.i32(), offsets.i32());
  else
    moe::assignPositions(experts.i32(), experts.numel(), e, positions.i32(),
                         offsets.i32());
  return capacity;
}

void runMoeSort(const KernelArgs &args) {
  sortChoices(args, args.ins[0], args.outs[0], args.outs[1]);
}

// moe_gather: every row zero, then each choice's row copied in (the
// positions of moe_sort are distinct).
template <typename T> void runMoeGather(const KernelArgs &args) {
  const Rows g = rowsOf(args.ins[0], args.ins[1]);
  const T *x = dataOf<T>(args.ins[0]);
  const int32_t *positions = args.ins[1].i32();
  T *xs = dataOf<T>(args.outs[0]);
  const int64_t rows = args.outs[0].desc->shape[0];
  parallelFor(poolOf(args), rows, rowGrain(g.d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      zero(xs + r * g.d, g.d);
  });
  parallelFor(poolOf(args), g.n * g.k, rowGrain(g.d),
              [&](int64_t a0, int64_t a1) {
                for (int64_t a = a0; a < a1; ++a)
                  if (positions[a] >= 0 && positions[a] < rows)
                    convert(x + (a / g.k) * g.d, xs + positions[a] * g.d, g.d);
              });
}

template <typename T> void runMoePermute(const KernelArgs &args) {
  const Rows g = rowsOf(args.ins[0], args.ins[1]);
  const T *x = dataOf<T>(args.ins[0]);
  T *xs = dataOf<T>(args.outs[0]);
  int32_t *positions = args.outs[1].i32(), *offsets = args.outs[2].i32();
  const int64_t e = args.outs[2].desc->shape[0] - 1;
  const int64_t capacity =
      sortChoices(args, args.ins[1], args.outs[1], args.outs[2]);
  if (capacity > 0) {
    const int64_t slots = e * capacity;
    parallelFor(poolOf(args), slots, rowGrain(g.d),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t r = r0; r < r1; ++r)
                    zero(xs + r * g.d, g.d);
                });
    parallelFor(
        poolOf(args), g.n * g.k, rowGrain(g.d), [&](int64_t a0, int64_t a1) {
          for (int64_t a = a0; a < a1; ++a)
            if (positions[a] >= 0)
              convert(x + (a / g.k) * g.d, xs + positions[a] * g.d, g.d);
        });
    return;
  }
  const int64_t used = offsets[e];
  parallelFor(poolOf(args), g.n * g.k, rowGrain(g.d),
              [&](int64_t a0, int64_t a1) {
                for (int64_t a = a0; a < a1; ++a) {
                  if (positions[a] >= 0)
                    convert(x + (a / g.k) * g.d, xs + positions[a] * g.d, g.d);
                  // The unused rows are the last ones, one per unrouted
                  // assignment.
                  if (a >= used)
                    zero(xs + a * g.d, g.d);
                }
              });
}

// The row arithmetic the fused combine (moe_unpermute and its gradient)
// and the unfused one (moe_gather_choices, moe_weighted_sum and their
// gradients) share, so that both give the same bits.
// acc += w * row.
template <typename T>
BRAID_INLINE void addWeighted(float *acc, float w, const T *row, int64_t d) {
  for (int64_t i = 0; i < d; ++i)
    acc[i] += w * load(row, i);
}

// out = w * row, rounded to T.
template <typename T>
BRAID_INLINE void storeScaled(T *out, float w, const T *row, int64_t d) {
  for (int64_t i = 0; i < d; ++i)
    store(out, i, w * load(row, i));
}

// a . b in f32, in element order.
template <typename T>
BRAID_INLINE float dotRows(const T *a, const T *b, int64_t d) {
  float dot = 0.0f;
  for (int64_t i = 0; i < d; ++i)
    dot += load(a, i) * load(b, i);
  return dot;
}

// out[t] = the sum over t's choices, in order, in f32, of w * rows at the
// choice's position (w = 1 without weights): moe_permute_grad's dx and
// moe_unpermute's y.
template <typename T>
void gatherChoices(const KernelArgs &args, const TensorView &rowsIn,
                   const float *weights) {
  const Rows g = rowsOf(args.outs[0], args.ins[1]);
  const T *in = dataOf<T>(rowsIn);
  const int32_t *positions = args.ins[1].i32();
  T *out = dataOf<T>(args.outs[0]);
  const int64_t rows = g.d == 0 ? 0 : rowsIn.numel() / g.d;
  parallelFor(poolOf(args), g.n, rowGrain(g.d * g.k),
              [&](int64_t t0, int64_t t1) {
                float *acc = threadScratch(0, g.d);
                for (int64_t t = t0; t < t1; ++t) {
                  zero(acc, g.d);
                  for (int64_t j = 0; j < g.k; ++j) {
                    const int32_t p = positions[t * g.k + j];
                    if (p < 0 || p >= rows)
                      continue;
                    addWeighted(acc,
                                weights ? weights[t * g.k + j] : 1.0f,
                                in + p * g.d, g.d);
                  }
                  convert(acc, out + t * g.d, g.d);
                }
              });
}

template <typename T> void runMoePermuteGrad(const KernelArgs &args) {
  gatherChoices<T>(args, args.ins[0], nullptr);
}

template <typename T> void runMoeUnpermute(const KernelArgs &args) {
  gatherChoices<T>(args, args.ins[0], args.ins[2].f32());
}

// dys at each choice's position = weight * dy[t] (rows no choice takes
// are zero; of choices that share a position, which moe_permute never
// gives, the last); dweights = dy[t] . ys at the position, summed in f32
// in element order (0 without a position).
template <typename T> void runMoeUnpermuteGrad(const KernelArgs &args) {
  const Rows g = rowsOf(args.ins[0], args.ins[2]);
  const T *dy = dataOf<T>(args.ins[0]), *ys = dataOf<T>(args.ins[1]);
  const int32_t *positions = args.ins[2].i32();
  const float *weights = args.ins[3].f32();
  T *dys = dataOf<T>(args.outs[0]);
  float *dweights = args.outs[1].f32();
  const int64_t rows = g.d == 0 ? 0 : args.ins[1].numel() / g.d;
  const int64_t choices = g.n * g.k;
  // Reused across launches, so that the backward does not allocate. The
  // pool's threads read the launching thread's buffer through this
  // reference: naming the thread_local inside the loop body would give
  // each of them its own, empty one.
  thread_local std::vector<int64_t> ownerBuffer;
  std::vector<int64_t> &owner = ownerBuffer;
  owner.assign(static_cast<size_t>(rows), -1);
  for (int64_t a = 0; a < choices; ++a)
    if (positions[a] >= 0 && positions[a] < rows)
      owner[positions[a]] = a;
  parallelFor(poolOf(args), rows, rowGrain(g.d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t a = owner[r];
      if (a < 0) {
        zero(dys + r * g.d, g.d);
        continue;
      }
      storeScaled(dys + r * g.d, weights[a], dy + (a / g.k) * g.d, g.d);
    }
  });
  parallelFor(
      poolOf(args), choices, rowGrain(g.d), [&](int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a) {
          const int32_t p = positions[a];
          dweights[a] = p >= 0 && p < rows
                            ? dotRows(dy + (a / g.k) * g.d, ys + p * g.d, g.d)
                            : 0.0f;
        }
      });
}

// The unfused combine (docs/fusion.md). moe_gather_choices: choices[a] =
// rows[positions[a]], zero for a dropped choice.
template <typename T> void runMoeGatherChoices(const KernelArgs &args) {
  const T *rows = dataOf<T>(args.ins[0]);
  const int32_t *positions = args.ins[1].i32();
  T *choices = dataOf<T>(args.outs[0]);
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t rowCount = args.ins[0].desc->shape[0];
  parallelFor(poolOf(args), args.ins[1].numel(), rowGrain(d),
              [&](int64_t a0, int64_t a1) {
                for (int64_t a = a0; a < a1; ++a) {
                  const int32_t p = positions[a];
                  if (p >= 0 && p < rowCount)
                    convert(rows + p * d, choices + a * d, d);
                  else
                    zero(choices + a * d, d);
                }
              });
}

// moe_gather_choices_grad: every row zero, then each choice's gradient
// written to its row (the positions of moe_sort are distinct).
template <typename T> void runMoeGatherChoicesGrad(const KernelArgs &args) {
  const T *dchoices = dataOf<T>(args.ins[0]);
  const int32_t *positions = args.ins[1].i32();
  T *drows = dataOf<T>(args.outs[0]);
  const int64_t d = args.outs[0].desc->lastDim();
  const int64_t rowCount = args.outs[0].desc->shape[0];
  parallelFor(poolOf(args), rowCount, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      zero(drows + r * d, d);
  });
  parallelFor(poolOf(args), args.ins[1].numel(), rowGrain(d),
              [&](int64_t a0, int64_t a1) {
                for (int64_t a = a0; a < a1; ++a)
                  if (positions[a] >= 0 && positions[a] < rowCount)
                    convert(dchoices + a * d, drows + positions[a] * d, d);
              });
}

// moe_weighted_sum: y[t] = sum_j w[t, j] * choices[t, j] in f32, in choice
// order.
template <typename T> void runMoeWeightedSum(const KernelArgs &args) {
  const T *choices = dataOf<T>(args.ins[0]);
  const float *weights = args.ins[1].f32();
  T *y = dataOf<T>(args.outs[0]);
  const int64_t d = args.outs[0].desc->lastDim();
  const int64_t k = args.ins[1].desc->lastDim();
  const int64_t n = k == 0 ? 0 : args.ins[1].numel() / k;
  parallelFor(poolOf(args), n, rowGrain(d * k), [&](int64_t t0, int64_t t1) {
    float *acc = threadScratch(0, d);
    for (int64_t t = t0; t < t1; ++t) {
      zero(acc, d);
      for (int64_t j = 0; j < k; ++j)
        addWeighted(acc, weights[t * k + j], choices + (t * k + j) * d, d);
      convert(acc, y + t * d, d);
    }
  });
}

// moe_weighted_sum_grad: dchoices[t, j] = w[t, j] * dy[t]; dweights[t, j]
// = dy[t] . choices[t, j].
template <typename T> void runMoeWeightedSumGrad(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *choices = dataOf<T>(args.ins[1]);
  const float *weights = args.ins[2].f32();
  T *dchoices = dataOf<T>(args.outs[0]);
  float *dweights = args.outs[1].f32();
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t k = args.ins[2].desc->lastDim();
  parallelFor(poolOf(args), args.ins[2].numel(), rowGrain(d),
              [&](int64_t a0, int64_t a1) {
                for (int64_t a = a0; a < a1; ++a) {
                  const T *dyRow = dy + (a / k) * d;
                  storeScaled(dchoices + a * d, weights[a], dyRow, d);
                  dweights[a] = dotRows(dyRow, choices + a * d, d);
                }
              });
}

// Adaptive recompute (docs/moe.md): n = the rows the rank's experts
// received. moe_keep_rows copies rows [0, n) of x [R, F] into kept [K, F]
// when n <= K and writes nothing otherwise (the backward recomputes);
// moe_restore_rows, in the recomputed rows' buffer y [R, F], writes the kept
// rows and zeros after them when n <= K, and leaves y (the recomputed
// rows) as it is otherwise.
int64_t receivedRows(const TensorView &offsets, int64_t rows) {
  return moe::receivedRows(offsets.i32(), offsets.numel() - 1, rows);
}

template <typename T> void runMoeKeepRows(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &kept = args.outs[0];
  const int64_t n = receivedRows(args.ins[1], x.desc->shape[0]);
  const bool keeps = n <= kept.desc->shape[0];
  if (KernelCounters *c = contextOf(args).counters)
    ++(keeps ? c->activationsKept : c->activationsRecomputed);
  if (!keeps)
    return;
  const T *from = dataOf<T>(x);
  std::copy(from, from + n * x.desc->lastDim(), dataOf<T>(kept));
}

template <typename T> void runMoeRestoreRows(const KernelArgs &args) {
  const TensorView &kept = args.ins[0], &y = args.outs[0];
  const int64_t rows = y.desc->shape[0], width = y.desc->lastDim();
  const int64_t n = receivedRows(args.ins[1], rows);
  if (n > kept.desc->shape[0])
    return;
  const T *from = dataOf<T>(kept);
  T *to = dataOf<T>(y);
  std::copy(from, from + n * width, to);
  std::fill(to + n * width, to + rows * width, T{});
}

// Hot-expert replication (docs/moe.md): the choice from the EP group's
// gathered counts [G * E], counted for the run's log.
void runMoeHotExperts(const KernelArgs &args) {
  const TensorView &counts = args.ins[0];
  const int64_t ranks = paramsOf(args).intOr("ranks", 1);
  const bool on = moe::chooseHotExperts(
      counts.i32(), ranks, counts.numel() / ranks,
      paramsOf(args).floatOr("threshold", 1.0), args.outs[0].numel(),
      args.outs[0].i32(), args.outs[1].i32());
  if (KernelCounters *c = contextOf(args).counters)
    ++(on ? c->replicationOn : c->replicationOff);
}

// The layout of a split or merge launch: rows [N, D] (x or y), hot rows
// [Nh, D], offsets [E + 1] and hot [H].
moe::HotRows hotRowsOf(const TensorView &rows, const TensorView &hotRows,
                       const TensorView &offsets, const TensorView &hot) {
  return {offsets.i32(),       offsets.numel() - 1, hot.i32(),
          hot.numel(),         rows.desc->shape[0], hotRows.desc->shape[0]};
}

// Row `to` of `out` = row `from` of `in` (the bits), or zeros for -1.
template <typename T>
void copyRow(const T *in, int64_t from, T *out, int64_t to, int64_t d) {
  if (from < 0)
    zero(out + to * d, d);
  else
    convert(in + from * d, out + to * d, d);
}

// cold and hot_rows row by row, each from the row of x the layout names.
template <typename T> void runMoeSplitRows(const KernelArgs &args) {
  const TensorView &x = args.ins[0];
  const moe::HotRows l =
      hotRowsOf(x, args.outs[1], args.ins[1], args.ins[2]);
  const int64_t d = x.desc->lastDim();
  const T *from = dataOf<T>(x);
  T *cold = dataOf<T>(args.outs[0]), *hot = dataOf<T>(args.outs[1]);
  l.hotOffsets(args.outs[2].i32());
  parallelFor(poolOf(args), l.rows + l.hotRows, rowGrain(d + l.experts),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  if (r < l.rows)
                    copyRow(from, l.coldSource(r), cold, r, d);
                  else
                    copyRow(from, l.hotSource(r - l.rows), hot, r - l.rows,
                            d);
                }
              });
}

// y row by row from the cold or the hot rows.
template <typename T> void runMoeMergeRows(const KernelArgs &args) {
  const TensorView &cold = args.ins[0], &hotRows = args.ins[1];
  const TensorView &y = args.outs[0];
  const moe::HotRows l = hotRowsOf(y, hotRows, args.ins[2], args.ins[3]);
  const int64_t d = y.desc->lastDim();
  const T *fromCold = dataOf<T>(cold), *fromHot = dataOf<T>(hotRows);
  T *to = dataOf<T>(y);
  parallelFor(poolOf(args), l.rows, rowGrain(d + l.experts),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  bool hot = false;
                  const int64_t p = l.mergeSource(r, hot);
                  copyRow(hot ? fromHot : fromCold, p, to, r, d);
                }
              });
}

// Sub-units: a [B, S, X] tensor and its P parts [B, S / P, X] along the
// sequence; each (b, p) is one contiguous block, copied as bytes (token
// rows, router weights or choices alike).
void copyTokenParts(const KernelArgs &args, bool split) {
  const TensorView &whole = split ? args.ins[0] : args.outs[0];
  const absl::Span<const TensorView> parts = split ? args.outs : args.ins;
  const int64_t p = static_cast<int64_t>(parts.size());
  const std::vector<int64_t> &shape = whole.desc->shape;
  const int64_t block = shape[1] / p * shape[2] *
                        static_cast<int64_t>(dtypeSize(whole.desc->dtype));
  auto *all = static_cast<char *>(whole.data);
  parallelFor(poolOf(args), shape[0] * p, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / p, part = i % p;
      char *mine = static_cast<char *>(parts[part].data) + b * block;
      char *there = all + (b * p + part) * block;
      if (split)
        std::memcpy(mine, there, static_cast<size_t>(block));
      else
        std::memcpy(there, mine, static_cast<size_t>(block));
    }
  });
}

void runMoeSplitTokens(const KernelArgs &args) { copyTokenParts(args, true); }
void runMoeJoinTokens(const KernelArgs &args) { copyTokenParts(args, false); }

} // namespace

absl::Status registerMoeKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {{"moe_route", runMoeRoute},
       {"moe_route_grad", runMoeRouteGrad},
       {"moe_scores", runMoeScores},
       {"moe_scores_grad", runMoeScoresGrad},
       {"moe_topk", runMoeTopK},
       {"moe_topk_grad", runMoeTopKGrad},
       {"moe_sort", runMoeSort},
       {"moe_gather", byStorage<runMoeGather<float>, runMoeGather<Bf16>>},
       {"moe_gather_choices",
        byStorage<runMoeGatherChoices<float>, runMoeGatherChoices<Bf16>>},
       {"moe_gather_choices_grad", byStorage<runMoeGatherChoicesGrad<float>,
                                             runMoeGatherChoicesGrad<Bf16>>},
       {"moe_weighted_sum",
        byStorage<runMoeWeightedSum<float>, runMoeWeightedSum<Bf16>>},
       {"moe_weighted_sum_grad",
        byStorage<runMoeWeightedSumGrad<float>, runMoeWeightedSumGrad<Bf16>>},
       {"moe_expert_counts", runMoeExpertCounts},
       {"moe_block_counts", runMoeBlockCounts},
       {"moe_ep_offsets", runMoeEpOffsets},
       {"moe_aux_loss", runMoeAuxLoss},
       {"moe_aux_loss_grad", runMoeAuxLossGrad},
       {"moe_z_loss", runMoeZLoss},
       {"moe_bias_update", runMoeBiasUpdate},
       {"moe_z_loss_grad", runMoeZLossGrad},
       {"moe_keep_rows",
        byStorage<runMoeKeepRows<float>, runMoeKeepRows<Bf16>>},
       {"moe_restore_rows",
        byStorage<runMoeRestoreRows<float>, runMoeRestoreRows<Bf16>>},
       {"moe_hot_experts", runMoeHotExperts},
       {"moe_split_tokens", runMoeSplitTokens},
       {"moe_join_tokens", runMoeJoinTokens},
       {"moe_split_rows",
        byStorage<runMoeSplitRows<float>, runMoeSplitRows<Bf16>>},
       {"moe_merge_rows",
        byStorage<runMoeMergeRows<float>, runMoeMergeRows<Bf16>>},
       {"moe_permute", byStorage<runMoePermute<float>, runMoePermute<Bf16>>},
       {"moe_permute_grad",
        byStorage<runMoePermuteGrad<float>, runMoePermuteGrad<Bf16>>},
       {"moe_unpermute",
        byStorage<runMoeUnpermute<float>, runMoeUnpermute<Bf16>>},
       {"moe_unpermute_grad",
        byStorage<runMoeUnpermuteGrad<float>, runMoeUnpermuteGrad<Bf16>>}});
}

} // namespace braid::cpu
