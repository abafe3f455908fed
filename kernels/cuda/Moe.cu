// The mixture-of-experts kernels on CUDA (docs/kernels.md, docs/moe.md).
// moe_route and moe_route_grad: one thread per token row (grid-stride),
// each running the row arithmetic of kernels/common/MoeRoute.h that the
// CPU kernels run: a row holds a few dozen to a few hundred experts and
// the top-k is a k-pass scan of them, so both sides choose the same
// experts (ties to the lower expert). The unfused moe_scores, moe_topk,
// moe_sort, moe_gather, moe_gather_choices and moe_weighted_sum (and their
// gradients) call the same row functions and repeat the fused kernels'
// arithmetic, so fused and unfused agree. moe_permute: the assignments'
// positions by kernels/common/MoePermute.h's counting sort on one thread
// (a first version: exact and the CPU's, not fast), then one block per
// assignment copying its row; moe_permute_grad and moe_unpermute: one
// block per token, its choices summed in choice order in f32;
// moe_unpermute_grad: the rows zeroed, then one block per choice writing
// its row and its weight's gradient (positions from moe_permute, which
// never repeats one); moe_grouped_linear and its gradients: one thread per
// output element, each finding its row's expert in the offsets on the
// device (a first version, exact, not fast); moe_keep_rows and
// moe_restore_rows: adaptive recompute's copies; moe_hot_experts: the
// choice of kernels/common/MoeReplicate.h on one thread; moe_split_rows and
// moe_merge_rows: one block per output row, whose source row one thread
// finds with that header's mapping. No workspace, nothing allocated: a CUDA
// graph may capture them all.
#include <cstdint>

#include "kernels/common/MoeBalance.h"
#include "kernels/common/MoePermute.h"
#include "kernels/common/MoeReplicate.h"
#include "kernels/common/MoeRoute.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::kBlock;

moe::RouteParams routeParams(const KernelArgs &args) {
  const KernelParams &p = rows::paramsOf(args);
  return {static_cast<int>(p.intOr("sigmoid", 0) != 0),
          static_cast<int>(p.intOr("normalize", 0) != 0),
          static_cast<float>(p.floatOr("scale", 1.0))};
}

__global__ void __launch_bounds__(kBlock)
    moeRouteKernel(const float *__restrict__ logits,
                   const float *__restrict__ bias, int32_t *__restrict__ experts,
                   float *__restrict__ weights, float *__restrict__ scores,
                   int64_t n, int64_t e, int64_t k, moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::routeRow(logits + r * e, bias, e, k, p, scores + r * e,
                  experts + r * k, weights + r * k);
}

__global__ void __launch_bounds__(kBlock)
    moeRouteGradKernel(const float *__restrict__ dweights,
                       const float *__restrict__ scores,
                       const int32_t *__restrict__ experts,
                       const float *__restrict__ dscores,
                       float *__restrict__ dlogits, int64_t n, int64_t e,
                       int64_t k, moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::routeGradRow(dweights + r * k, scores + r * e, experts + r * k, e, k,
                      p, dscores ? dscores + r * e : nullptr, dlogits + r * e);
}

void runMoeRoute(const KernelArgs &args) {
  const int64_t e = args.ins[0].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[0].numel() / e;
  const int64_t k = args.outs[0].desc->lastDim();
  if (n == 0)
    return;
  moeRouteKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                   rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins.size() > 1 ? args.ins[1].f32() : nullptr,
      args.outs[0].i32(), args.outs[1].f32(), args.outs[2].f32(), n, e, k,
      routeParams(args));
}

void runMoeRouteGrad(const KernelArgs &args) {
  const int64_t e = args.ins[1].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[1].numel() / e;
  const int64_t k = args.ins[0].desc->lastDim();
  if (n == 0)
    return;
  moeRouteGradKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                       rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.ins[2].i32(),
      args.ins.size() > 3 ? args.ins[3].f32() : nullptr, args.outs[0].f32(), n,
      e, k, routeParams(args));
}

// The unfused router (braid-fuse-moe, docs/fusion.md): one thread per
// token row, as moe_route's, each calling the row function moe_route's
// calls in turn.
__global__ void __launch_bounds__(kBlock)
    moeScoresKernel(const float *__restrict__ logits,
                    float *__restrict__ scores, int64_t n, int64_t e,
                    int sigmoid) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::scoresRow(logits + r * e, e, sigmoid, scores + r * e);
}

__global__ void __launch_bounds__(kBlock)
    moeScoresGradKernel(const float *__restrict__ dscores,
                        const float *__restrict__ scores,
                        float *__restrict__ dlogits, int64_t n, int64_t e,
                        int sigmoid) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::scoresGradRow(dscores + r * e, scores + r * e, e, sigmoid,
                       dlogits + r * e);
}

__global__ void __launch_bounds__(kBlock)
    moeTopKKernel(const float *__restrict__ scores,
                  const float *__restrict__ bias, int32_t *__restrict__ experts,
                  float *__restrict__ weights, int64_t n, int64_t e, int64_t k,
                  moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::topkRow(scores + r * e, bias, e, k, p, experts + r * k,
                 weights + r * k);
}

// dscores: the row zeroed, then the weights' gradient added to the chosen
// experts' entries.
__global__ void __launch_bounds__(kBlock)
    moeTopKGradKernel(const float *__restrict__ dweights,
                      const float *__restrict__ scores,
                      const int32_t *__restrict__ experts,
                      float *__restrict__ dscores, int64_t n, int64_t e,
                      int64_t k, moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x) {
    float *row = dscores + r * e;
    for (int64_t i = 0; i < e; ++i)
      row[i] = 0.0f;
    moe::addTopkGradRow(dweights + r * k, scores + r * e, experts + r * k, e, k,
                        p, row);
  }
}

void runMoeScores(const KernelArgs &args) {
  const int64_t e = args.ins[0].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[0].numel() / e;
  if (n == 0)
    return;
  moeScoresKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                    rows::streamOf(args)>>>(
      args.ins[0].f32(), args.outs[0].f32(), n, e, routeParams(args).sigmoid);
}

void runMoeScoresGrad(const KernelArgs &args) {
  const int64_t e = args.ins[1].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[1].numel() / e;
  if (n == 0)
    return;
  moeScoresGradKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                        rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.outs[0].f32(), n, e,
      routeParams(args).sigmoid);
}

void runMoeTopK(const KernelArgs &args) {
  const int64_t e = args.ins[0].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[0].numel() / e;
  const int64_t k = args.outs[0].desc->lastDim();
  if (n == 0)
    return;
  moeTopKKernel<<<rows::gridFor(n, kBlock), kBlock, 0, rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins.size() > 1 ? args.ins[1].f32() : nullptr,
      args.outs[0].i32(), args.outs[1].f32(), n, e, k, routeParams(args));
}

void runMoeTopKGrad(const KernelArgs &args) {
  const int64_t e = args.ins[1].desc->lastDim();
  const int64_t n = e == 0 ? 0 : args.ins[1].numel() / e;
  const int64_t k = args.ins[0].desc->lastDim();
  if (n == 0)
    return;
  moeTopKGradKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                      rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.ins[2].i32(),
      args.outs[0].f32(), n, e, k, routeParams(args));
}

// --- balancing losses
// ---------------------------------------------------------
//
// The counts and the two losses are sums over every row in one order, on
// one thread (a first version: exact and the CPU's order, not fast); the
// gradients are one thread per row.

__global__ void expertCountsKernel(const int32_t *__restrict__ experts,
                                   int64_t choices, int64_t e,
                                   float *__restrict__ counts) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    moe::countExperts(experts, choices, e, counts);
}

__global__ void auxLossKernel(const float *__restrict__ scores,
                              const float *__restrict__ counts, int64_t n,
                              int64_t e, int sigmoid, double factor,
                              float *__restrict__ loss) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    loss[0] =
        static_cast<float>(factor * moe::auxSum(scores, counts, n, e, sigmoid));
}

__global__ void __launch_bounds__(kBlock)
    auxGradKernel(const float *__restrict__ scores,
                  const float *__restrict__ counts, int64_t n, int64_t e,
                  int sigmoid, double factor, float *__restrict__ dscores) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::auxGradRow(scores + r * e, counts, e, sigmoid, factor,
                    dscores + r * e);
}

__global__ void zLossKernel(const float *__restrict__ logits, int64_t n,
                            int64_t e, double factor,
                            float *__restrict__ loss) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    loss[0] = static_cast<float>(factor * moe::zSum(logits, n, e));
}

__global__ void __launch_bounds__(kBlock)
    zGradKernel(const float *__restrict__ logits, int64_t n, int64_t e,
                double factor, float *__restrict__ dlogits) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::zGradRow(logits + r * e, e, factor, dlogits + r * e);
}

struct BalanceRows {
  int64_t n = 0, e = 0;
  double coeff = 0, scale = 1;
  int sigmoid = 0, topK = 1;
  int64_t parts = 1;
};

BalanceRows balanceRows(const KernelArgs &args) {
  const KernelParams &p = rows::paramsOf(args);
  BalanceRows b;
  b.e = args.ins[0].desc->lastDim();
  b.n = b.e == 0 ? 0 : args.ins[0].numel() / b.e;
  b.coeff = p.floatOr("coeff", 0.0);
  b.scale = p.floatOr("scale", 1.0);
  b.sigmoid = p.intOr("sigmoid", 0) != 0;
  b.topK = static_cast<int>(p.intOr("top_k", 1));
  b.parts = p.intOr("parts", 1);
  return b;
}

double auxFactor(const BalanceRows &b) {
  return moe::auxFactor(b.coeff, b.e, b.topK, b.n, b.parts);
}

__global__ void blockCountsKernel(const int32_t *__restrict__ offsets,
                                  int64_t blocks, int32_t *__restrict__ counts) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    moe::blockCounts(offsets, blocks, counts);
}

__global__ void epOffsetsKernel(const int32_t *__restrict__ counts,
                                int64_t ranks, int64_t m, int64_t me,
                                int32_t *__restrict__ offsets) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    moe::exchangeOffsets(counts, ranks, m, me, offsets);
}

void runBlockCounts(const KernelArgs &args) {
  blockCountsKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      args.ins[0].i32(), args.outs[0].numel(), args.outs[0].i32());
}

// The group's size G from the shapes: counts G x G x m, offsets G x m + 1.
void runEpOffsets(const KernelArgs &args) {
  const int64_t blocks = args.outs[0].numel() - 1;
  const int64_t ranks = args.ins[0].numel() / blocks;
  epOffsetsKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      args.ins[0].i32(), ranks, blocks / ranks,
      args.ctx != nullptr ? args.ctx->epRank : 0, args.outs[0].i32());
}

void runExpertCounts(const KernelArgs &args) {
  expertCountsKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      args.ins[0].i32(), args.ins[0].numel(), args.outs[0].numel(),
      args.outs[0].f32());
}

void runAuxLoss(const KernelArgs &args) {
  const BalanceRows b = balanceRows(args);
  auxLossKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), b.n, b.e, b.sigmoid, auxFactor(b),
      args.outs[0].f32());
}

void runAuxLossGrad(const KernelArgs &args) {
  const BalanceRows b = balanceRows(args);
  if (b.n == 0)
    return;
  auxGradKernel<<<rows::gridFor(b.n, kBlock), kBlock, 0,
                  rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), b.n, b.e, b.sigmoid,
      auxFactor(b) * b.scale, args.outs[0].f32());
}

__global__ void biasUpdateKernel(const float *__restrict__ load,
                                 const float *__restrict__ skip, int64_t e,
                                 double rate, float *__restrict__ bias) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && skip[0] == 0.0f)
    moe::biasUpdate(load, e, rate, bias);
}

void runBiasUpdate(const KernelArgs &args) {
  biasUpdateKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.outs[0].numel(),
      rows::paramsOf(args).floatOr("rate", 0.0), args.outs[0].f32());
}

void runZLoss(const KernelArgs &args) {
  const BalanceRows b = balanceRows(args);
  zLossKernel<<<1, 1, 0, rows::streamOf(args)>>>(args.ins[0].f32(), b.n, b.e,
                                                 moe::zFactor(b.coeff, b.n),
                                                 args.outs[0].f32());
}

void runZLossGrad(const KernelArgs &args) {
  const BalanceRows b = balanceRows(args);
  if (b.n == 0)
    return;
  zGradKernel<<<rows::gridFor(b.n, kBlock), kBlock, 0, rows::streamOf(args)>>>(
      args.ins[0].f32(), b.n, b.e, moe::zFactor(b.coeff, b.n) * b.scale,
      args.outs[0].f32());
}

// --- permute ----------------------------------------------------------------

using rows::load;
using rows::store;

__global__ void assignKernel(const int32_t *__restrict__ experts,
                             int64_t assignments, int64_t e, int64_t capacity,
                             int32_t *__restrict__ positions,
                             int32_t *__restrict__ offsets) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  if (capacity > 0)
    moe::assignSlots(experts, assignments, e, capacity, positions, offsets);
  else
    moe::assignPositions(experts, assignments, e, positions, offsets);
}

// xs[positions[a]] = x[a / k]; rows from offsets[e] on (no assignment's)
// are zero (in capacity mode, zeroRowsKernel zeroed every slot before).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    permuteRowsKernel(const T *__restrict__ x,
                      const int32_t *__restrict__ positions,
                      const int32_t *__restrict__ offsets, T *__restrict__ xs,
                      int64_t rows, int64_t k, int64_t d, int64_t e,
                      bool capacity) {
  const int64_t used = capacity ? rows : offsets[e];
  for (int64_t a = blockIdx.x; a < rows; a += gridDim.x) {
    const int32_t p = positions[a];
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      if (p >= 0)
        xs[p * d + i] = x[(a / k) * d + i];
      if (a >= used)
        xs[a * d + i] = T(0);
    }
  }
}

// out[t] = the sum over t's choices, in order, of w * rows at the choice's
// position (w = 1 without weights).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    gatherChoicesKernel(const T *__restrict__ rowsIn,
                        const int32_t *__restrict__ positions,
                        const float *__restrict__ weights, T *__restrict__ out,
                        int64_t n, int64_t k, int64_t d, int64_t rows) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x)
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t p = positions[t * k + j];
        if (p < 0 || p >= rows)
          continue;
        const float v = load(rowsIn, p * d + i);
        acc += weights ? weights[t * k + j] * v : v;
      }
      store(out, t * d + i, acc);
    }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    zeroRowsKernel(T *__restrict__ out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = T(0);
}

// dys at each choice's position = w * dy[t]; dweights = dy[t] . ys there,
// summed by a block reduction.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    unpermuteGradKernel(const T *__restrict__ dy, const T *__restrict__ ys,
                        const int32_t *__restrict__ positions,
                        const float *__restrict__ weights, T *__restrict__ dys,
                        float *__restrict__ dweights, int64_t n, int64_t k,
                        int64_t d, int64_t rows) {
  __shared__ float scratch[rows::kWarps];
  for (int64_t a = blockIdx.x; a < n * k; a += gridDim.x) {
    const int32_t p = positions[a];
    float dot = 0.0f;
    if (p >= 0 && p < rows)
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = load(dy, (a / k) * d + i);
        dot += v * load(ys, p * d + i);
        store(dys, p * d + i, weights[a] * v);
      }
    dot = rows::blockSum(dot, scratch);
    if (threadIdx.x == 0)
      dweights[a] = dot;
  }
}

template <typename T> void runPermute(const KernelArgs &args) {
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t k = args.ins[1].desc->lastDim();
  const int64_t rows = args.ins[1].numel();
  const int64_t e = args.outs[2].desc->shape[0] - 1;
  const int64_t capacity = rows::paramsOf(args).intOr("capacity", 0);
  cudaStream_t stream = rows::streamOf(args);
  assignKernel<<<1, 1, 0, stream>>>(args.ins[1].i32(), rows, e, capacity,
                                    args.outs[1].i32(), args.outs[2].i32());
  if (capacity > 0 && e * capacity * d > 0)
    zeroRowsKernel<T>
        <<<rows::gridFor(e * capacity * d, kBlock), kBlock, 0, stream>>>(
            dataOf<T>(args.outs[0]), e * capacity * d);
  if (rows == 0 || d == 0)
    return;
  permuteRowsKernel<T><<<rows::gridFor(rows, 1), kBlock, 0, stream>>>(
      dataOf<T>(args.ins[0]), args.outs[1].i32(), args.outs[2].i32(),
      dataOf<T>(args.outs[0]), rows, k, d, e, capacity > 0);
}

// moe_permute_grad (no weights) and moe_unpermute (weights, input 2).
template <typename T>
void runGather(const KernelArgs &args, const float *weights) {
  const int64_t d = args.outs[0].desc->lastDim();
  const int64_t k = args.ins[1].desc->lastDim();
  const int64_t n = k == 0 ? 0 : args.ins[1].numel() / k;
  if (n == 0 || d == 0)
    return;
  gatherChoicesKernel<T>
      <<<rows::gridFor(n, 1), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(args.ins[0]), args.ins[1].i32(), weights,
          dataOf<T>(args.outs[0]), n, k, d, args.ins[0].numel() / d);
}

template <typename T> void runPermuteGrad(const KernelArgs &args) {
  runGather<T>(args, nullptr);
}

template <typename T> void runUnpermute(const KernelArgs &args) {
  runGather<T>(args, args.ins[2].f32());
}

template <typename T> void runUnpermuteGrad(const KernelArgs &args) {
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t k = args.ins[2].desc->lastDim();
  const int64_t n = k == 0 ? 0 : args.ins[2].numel() / k;
  const int64_t rows = d == 0 ? 0 : args.ins[1].numel() / d;
  cudaStream_t stream = rows::streamOf(args);
  if (rows * d > 0)
    zeroRowsKernel<T><<<rows::gridFor(rows * d, kBlock), kBlock, 0, stream>>>(
        dataOf<T>(args.outs[0]), rows * d);
  if (n * k == 0)
    return;
  unpermuteGradKernel<T><<<rows::gridFor(n * k, 1), kBlock, 0, stream>>>(
      dataOf<T>(args.ins[0]), dataOf<T>(args.ins[1]), args.ins[2].i32(),
      args.ins[3].f32(), dataOf<T>(args.outs[0]), args.outs[1].f32(), n, k, d,
      rows);
}

// --- the unfused permutations -----------------------------------------------
//
// moe_sort is moe_permute's assignKernel alone. The copies are one block
// per choice, as moe_permute's; moe_weighted_sum is gatherChoicesKernel's
// sum on rows already gathered, and its gradient unpermuteGradKernel's
// arithmetic and block reduction, so that fused and unfused give the same
// bits.

// to[positions[a]] = from[a / k] for each choice a whose position is a row
// of `to` [rows, d], zeroed before: moe_gather (k = K) and
// moe_gather_choices_grad (k = 1). The positions are distinct.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    scatterRowsKernel(const T *__restrict__ from,
                      const int32_t *__restrict__ positions, T *__restrict__ to,
                      int64_t choices, int64_t k, int64_t d, int64_t rows) {
  for (int64_t a = blockIdx.x; a < choices; a += gridDim.x) {
    const int32_t p = positions[a];
    if (p < 0 || p >= rows)
      continue;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      to[p * d + i] = from[(a / k) * d + i];
  }
}

// choices[a] = rows at positions[a], zero for a dropped choice.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    gatherRowsKernel(const T *__restrict__ rowsIn,
                     const int32_t *__restrict__ positions,
                     T *__restrict__ choices, int64_t count, int64_t d,
                     int64_t rows) {
  for (int64_t a = blockIdx.x; a < count; a += gridDim.x) {
    const int32_t p = positions[a];
    const bool taken = p >= 0 && p < rows;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      choices[a * d + i] = taken ? rowsIn[p * d + i] : T(0);
  }
}

// y[t] = the sum over t's choices, in order, in f32, of w * the choice's
// row: gatherChoicesKernel's accumulation (a dropped choice's row is zero
// here, where that kernel skips it).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    weightedSumKernel(const T *__restrict__ choices,
                      const float *__restrict__ weights, T *__restrict__ y,
                      int64_t n, int64_t k, int64_t d) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x)
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float v = load(choices, (t * k + j) * d + i);
        acc += weights[t * k + j] * v;
      }
      store(y, t * d + i, acc);
    }
}

// dchoices[a] = w * dy[a / k]; dweights[a] = dy[a / k] . choices[a], summed
// by the block reduction of unpermuteGradKernel.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    weightedSumGradKernel(const T *__restrict__ dy,
                          const T *__restrict__ choices,
                          const float *__restrict__ weights,
                          T *__restrict__ dchoices,
                          float *__restrict__ dweights, int64_t count,
                          int64_t k, int64_t d) {
  __shared__ float scratch[rows::kWarps];
  for (int64_t a = blockIdx.x; a < count; a += gridDim.x) {
    float dot = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = load(dy, (a / k) * d + i);
      dot += v * load(choices, a * d + i);
      store(dchoices, a * d + i, weights[a] * v);
    }
    dot = rows::blockSum(dot, scratch);
    if (threadIdx.x == 0)
      dweights[a] = dot;
  }
}

void runMoeSort(const KernelArgs &args) {
  const TensorView &experts = args.ins[0];
  assignKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      experts.i32(), experts.numel(), args.outs[1].desc->shape[0] - 1,
      rows::paramsOf(args).intOr("capacity", 0), args.outs[0].i32(),
      args.outs[1].i32());
}

// The rows of `to` [R, D] zeroed, then each choice's row of `from` written
// to its position.
template <typename T>
void launchScatter(const KernelArgs &args, const TensorView &from,
                   const TensorView &positions, const TensorView &to,
                   int64_t k) {
  const int64_t d = to.desc->lastDim();
  const int64_t rows = to.desc->shape[0];
  const int64_t choices = positions.numel();
  cudaStream_t stream = rows::streamOf(args);
  if (rows * d > 0)
    zeroRowsKernel<T><<<rows::gridFor(rows * d, kBlock), kBlock, 0, stream>>>(
        dataOf<T>(to), rows * d);
  if (choices == 0 || d == 0)
    return;
  scatterRowsKernel<T><<<rows::gridFor(choices, 1), kBlock, 0, stream>>>(
      dataOf<T>(from), positions.i32(), dataOf<T>(to), choices, k, d, rows);
}

template <typename T> void runMoeGather(const KernelArgs &args) {
  launchScatter<T>(args, args.ins[0], args.ins[1], args.outs[0],
                   args.ins[1].desc->lastDim());
}

template <typename T> void runMoeGatherChoicesGrad(const KernelArgs &args) {
  launchScatter<T>(args, args.ins[0], args.ins[1], args.outs[0], 1);
}

template <typename T> void runMoeGatherChoices(const KernelArgs &args) {
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t count = args.ins[1].numel();
  if (count == 0 || d == 0)
    return;
  gatherRowsKernel<T>
      <<<rows::gridFor(count, 1), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(args.ins[0]), args.ins[1].i32(), dataOf<T>(args.outs[0]),
          count, d, args.ins[0].desc->shape[0]);
}

template <typename T> void runMoeWeightedSum(const KernelArgs &args) {
  const int64_t d = args.outs[0].desc->lastDim();
  const int64_t k = args.ins[1].desc->lastDim();
  const int64_t n = k == 0 ? 0 : args.ins[1].numel() / k;
  if (n == 0 || d == 0)
    return;
  weightedSumKernel<T>
      <<<rows::gridFor(n, 1), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(args.ins[0]), args.ins[1].f32(), dataOf<T>(args.outs[0]), n,
          k, d);
}

template <typename T> void runMoeWeightedSumGrad(const KernelArgs &args) {
  const int64_t d = args.ins[0].desc->lastDim();
  const int64_t k = args.ins[2].desc->lastDim();
  const int64_t count = args.ins[2].numel();
  if (count == 0)
    return;
  weightedSumGradKernel<T>
      <<<rows::gridFor(count, 1), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(args.ins[0]), dataOf<T>(args.ins[1]), args.ins[2].f32(),
          dataOf<T>(args.outs[0]), args.outs[1].f32(), count, k, d);
}

// --- grouped linear -----------------------------------------------------------
//
// One thread per output element, f32 accumulation in reduction order: a
// first version, exact and simple, not fast (no tiles, no tensor cores).

// The block g whose rows [offsets[g], offsets[g + 1]) hold row r, or -1
// for rows from offsets[blocks] on; block g is expert g mod E's (one block
// per expert, or per sending rank and expert under expert parallel).
// Without offsets (moe_batched_linear) the rows are E equal blocks.
__device__ int64_t blockOfRow(const int32_t *__restrict__ offsets,
                              int64_t blocks, int64_t r) {
  if (r >= offsets[blocks])
    return -1;
  int64_t lo = 0, hi = blocks - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// y [rows, m] (+)= x [rows, k] . w[e] [m, k]^T, or with `transposedW`
// y [rows, k'] = x [rows, m'] . w[e] [m', k'] (the input gradient).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    groupedLinearKernel(const T *__restrict__ x, const T *__restrict__ w,
                        const int32_t *__restrict__ offsets, T *__restrict__ y,
                        int64_t rows, int64_t m, int64_t k, int64_t experts,
                        int64_t blocks, bool transposedW, bool accumulate,
                        int64_t recomputeAbove) {
  // Adaptive recompute's clone: nothing to do when the rows were kept.
  if (recomputeAbove >= 0 && offsets &&
      moe::receivedRows(offsets, blocks, rows) <= recomputeAbove)
    return;
  const int64_t outWidth = transposedW ? k : m, inWidth = transposedW ? m : k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < rows * outWidth; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / outWidth, c = i % outWidth;
    const int64_t g =
        offsets ? blockOfRow(offsets, blocks, r) : r / (rows / experts);
    const int64_t e = g < 0 ? -1 : g % experts;
    float acc = accumulate ? load(y, i) : 0.0f;
    if (e >= 0) {
      const T *we = w + e * m * k;
      for (int64_t j = 0; j < inWidth; ++j)
        acc += load(x, r * inWidth + j) *
               load(we, transposedW ? j * k + c : c * k + j);
    }
    store(y, i, acc);
  }
}

__device__ int64_t clampRow(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// dw[e] [m, k] (+)= the sum over expert e's blocks g (g mod E = e) of
// dy[block g]^T x[block g], row after row into one f32 sum. The CPU kernel
// instead adds each block's product, computed on its own, in block order,
// so that a hot expert's replica (computed on another rank) sums to the
// same bits; expert parallel runs on CPU ranks only, so this one keeps
// the plain order.
template <typename T, typename U>
__global__ void __launch_bounds__(kBlock)
    groupedWeightGradKernel(const T *__restrict__ dy, const T *__restrict__ x,
                            const int32_t *__restrict__ offsets,
                            U *__restrict__ dw, int64_t rows, int64_t m,
                            int64_t k, int64_t experts, int64_t blocks,
                            bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < experts * m * k; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i / (m * k), j = i / k % m, c = i % k;
    const int64_t block = rows / experts;
    float acc = accumulate ? load(dw, i) : 0.0f;
    for (int64_t g = e; g < blocks; g += experts) {
      const int64_t lo = offsets ? clampRow(offsets[g], 0, rows) : g * block;
      const int64_t hi =
          offsets ? clampRow(offsets[g + 1], lo, rows) : (g + 1) * block;
      for (int64_t r = lo; r < hi; ++r)
        acc += load(dy, r * m + j) * load(x, r * k + c);
    }
    store(dw, i, acc);
  }
}

// The blocks of a grouped launch: one per offset but the last; E without
// offsets.
int64_t blocksOf(const KernelArgs &args, int64_t experts) {
  return args.ins.size() > 2 ? args.ins[2].desc->shape[0] - 1 : experts;
}

template <typename T>
void launchGrouped(const KernelArgs &args, bool transposedW) {
  const TensorView &in = args.ins[0], &w = args.ins[1];
  const int64_t rows = in.desc->shape[0];
  const int64_t experts = w.desc->shape[0], m = w.desc->shape[1],
                k = w.desc->shape[2];
  const int64_t total = rows * (transposedW ? k : m);
  if (total == 0)
    return;
  groupedLinearKernel<T>
      <<<rows::gridFor(total, kBlock), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(in), dataOf<T>(w),
          args.ins.size() > 2 ? args.ins[2].i32() : nullptr,
          dataOf<T>(args.outs[0]), rows, m, k, experts,
          blocksOf(args, experts), transposedW,
          transposedW && rows::paramsOf(args).intOr("accumulate", 0) != 0,
          transposedW ? -1
                      : rows::paramsOf(args).intOr("recompute_above", -1));
}

template <typename T> void runGroupedLinear(const KernelArgs &args) {
  launchGrouped<T>(args, false);
}

template <typename T> void runGroupedLinearGradInput(const KernelArgs &args) {
  launchGrouped<T>(args, true);
}

template <typename T, typename U>
void launchGroupedWeightGrad(const KernelArgs &args, U *dw) {
  const TensorView &dy = args.ins[0], &x = args.ins[1];
  const int64_t experts = args.outs[0].desc->shape[0];
  const int64_t rows = dy.desc->shape[0], m = dy.desc->lastDim(),
                k = x.desc->lastDim();
  const int64_t total = experts * m * k;
  if (total == 0)
    return;
  groupedWeightGradKernel<T, U>
      <<<rows::gridFor(total, kBlock), kBlock, 0, rows::streamOf(args)>>>(
          dataOf<T>(dy), dataOf<T>(x),
          args.ins.size() > 2 ? args.ins[2].i32() : nullptr, dw, rows, m, k,
          experts, blocksOf(args, experts),
          rows::paramsOf(args).intOr("accumulate", 0) != 0);
}

template <typename T> void runGroupedLinearGradWeight(const KernelArgs &args) {
  const TensorView &dw = args.outs[0];
  if (isBf16(dw))
    launchGroupedWeightGrad<T>(args, dataOf<rows::Bf16>(dw));
  else
    launchGroupedWeightGrad<T>(args, dw.f32());
}

// --- adaptive recompute --------------------------------------------------------
//
// moe_keep_rows and moe_restore_rows (kernels/cpu/Moe.cpp says what they
// write): one thread per element, each reading the rows received from the
// offsets on the device, so the host never waits for them.

template <typename T>
__global__ void __launch_bounds__(kBlock)
    keepRowsKernel(const T *__restrict__ x, const int32_t *__restrict__ offsets,
                   int64_t blocks, int64_t rows, int64_t width,
                   int64_t keptRows, T *__restrict__ kept) {
  const int64_t n = moe::receivedRows(offsets, blocks, rows);
  if (n > keptRows)
    return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < n * width; i += int64_t{gridDim.x} * blockDim.x)
    kept[i] = x[i];
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    restoreRowsKernel(const T *__restrict__ kept,
                      const int32_t *__restrict__ offsets, int64_t blocks,
                      int64_t rows, int64_t width, int64_t keptRows,
                      T *__restrict__ y) {
  const int64_t n = moe::receivedRows(offsets, blocks, rows);
  if (n > keptRows)
    return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < rows * width; i += int64_t{gridDim.x} * blockDim.x) {
    if (i < n * width)
      y[i] = kept[i];
    else
      store(y, i, 0.0f);
  }
}

template <typename T> void runKeepRows(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &offsets = args.ins[1];
  const TensorView &kept = args.outs[0];
  const int64_t rows = x.desc->shape[0], width = x.desc->lastDim();
  const int64_t keptRows = kept.desc->shape[0];
  if (keptRows * width == 0)
    return;
  keepRowsKernel<T>
      <<<rows::gridFor(keptRows * width, kBlock), kBlock, 0,
         rows::streamOf(args)>>>(dataOf<T>(x), offsets.i32(),
                                 offsets.desc->shape[0] - 1, rows, width,
                                 keptRows, dataOf<T>(kept));
}

template <typename T> void runRestoreRows(const KernelArgs &args) {
  const TensorView &kept = args.ins[0], &offsets = args.ins[1];
  const TensorView &y = args.outs[0];
  const int64_t rows = y.desc->shape[0], width = y.desc->lastDim();
  if (rows * width == 0)
    return;
  restoreRowsKernel<T>
      <<<rows::gridFor(rows * width, kBlock), kBlock, 0,
         rows::streamOf(args)>>>(dataOf<T>(kept), offsets.i32(),
                                 offsets.desc->shape[0] - 1, rows, width,
                                 kept.desc->shape[0], dataOf<T>(y));
}

// --- hot-expert replication ----------------------------------------------------
//
// moe_hot_experts on one thread (E is small; a first version, exact and
// the CPU's choice, not fast); it does not count its choice.
// moe_split_rows and moe_merge_rows: a block per output row; thread 0
// finds the row's source with moe::HotRows, and the block copies it.

__global__ void hotExpertsKernel(const int32_t *__restrict__ counts,
                                 int64_t ranks, int64_t experts,
                                 double threshold, int64_t slots,
                                 int32_t *__restrict__ hot,
                                 int32_t *__restrict__ cold) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    moe::chooseHotExperts(counts, ranks, experts, threshold, slots, hot, cold);
}

void runHotExperts(const KernelArgs &args) {
  const TensorView &counts = args.ins[0];
  const int64_t ranks = rows::paramsOf(args).intOr("ranks", 1);
  hotExpertsKernel<<<1, 1, 0, rows::streamOf(args)>>>(
      counts.i32(), ranks, counts.numel() / ranks,
      rows::paramsOf(args).floatOr("threshold", 1.0), args.outs[0].numel(),
      args.outs[0].i32(), args.outs[1].i32());
}

moe::HotRows hotRowsOf(const TensorView &rowsView, const TensorView &hotRows,
                       const TensorView &offsets, const TensorView &hot) {
  return {offsets.i32(),           offsets.numel() - 1,
          hot.i32(),               hot.numel(),
          rowsView.desc->shape[0], hotRows.desc->shape[0]};
}

__global__ void hotOffsetsKernel(moe::HotRows l, int32_t *__restrict__ out) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    l.hotOffsets(out);
}

// Rows [0, N) of the grid are cold's, [N, N + Nh) hot_rows'.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    splitRowsKernel(const T *__restrict__ x, moe::HotRows l,
                    T *__restrict__ cold, T *__restrict__ hot, int64_t d) {
  __shared__ int64_t source;
  for (int64_t r = blockIdx.x; r < l.rows + l.hotRows; r += gridDim.x) {
    const bool isCold = r < l.rows;
    if (threadIdx.x == 0)
      source = isCold ? l.coldSource(r) : l.hotSource(r - l.rows);
    __syncthreads();
    T *to = isCold ? cold + r * d : hot + (r - l.rows) * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      to[i] = source < 0 ? T(0) : x[source * d + i];
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    mergeRowsKernel(const T *__restrict__ cold, const T *__restrict__ hot,
                    moe::HotRows l, T *__restrict__ y, int64_t d) {
  __shared__ int64_t source;
  __shared__ bool fromHot;
  for (int64_t r = blockIdx.x; r < l.rows; r += gridDim.x) {
    if (threadIdx.x == 0) {
      bool h = false;
      source = l.mergeSource(r, h);
      fromHot = h;
    }
    __syncthreads();
    const T *from = fromHot ? hot : cold;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      y[r * d + i] = source < 0 ? T(0) : from[source * d + i];
    __syncthreads();
  }
}

template <typename T> void runSplitRows(const KernelArgs &args) {
  const TensorView &x = args.ins[0];
  const moe::HotRows l = hotRowsOf(x, args.outs[1], args.ins[1], args.ins[2]);
  const int64_t d = x.desc->lastDim();
  cudaStream_t stream = rows::streamOf(args);
  hotOffsetsKernel<<<1, 1, 0, stream>>>(l, args.outs[2].i32());
  if ((l.rows + l.hotRows) * d == 0)
    return;
  splitRowsKernel<T>
      <<<rows::gridFor(l.rows + l.hotRows, 1), kBlock, 0, stream>>>(
          dataOf<T>(x), l, dataOf<T>(args.outs[0]), dataOf<T>(args.outs[1]),
          d);
}

template <typename T> void runMergeRows(const KernelArgs &args) {
  const TensorView &y = args.outs[0];
  const moe::HotRows l = hotRowsOf(y, args.ins[1], args.ins[2], args.ins[3]);
  const int64_t d = y.desc->lastDim();
  if (l.rows * d == 0)
    return;
  mergeRowsKernel<T><<<rows::gridFor(l.rows, 1), kBlock, 0,
                       rows::streamOf(args)>>>(
      dataOf<T>(args.ins[0]), dataOf<T>(args.ins[1]), l, dataOf<T>(y), d);
}

// Sub-units: a [B, S, X] tensor and its P parts [B, S / P, X] along the
// sequence. Part p is B blocks of S / P x X elements, one every S x X:
// one strided copy per part, as bytes (rows, weights or choices alike).
void copyTokenParts(const KernelArgs &args, bool split) {
  const TensorView &whole = split ? args.ins[0] : args.outs[0];
  const auto parts = split ? args.outs : args.ins;
  const int64_t p = static_cast<int64_t>(parts.size());
  const std::vector<int64_t> &shape = whole.desc->shape;
  const size_t block = static_cast<size_t>(shape[1] / p * shape[2] *
                                           dtypeSize(whole.desc->dtype));
  if (block == 0 || shape[0] == 0)
    return;
  const size_t pitch = block * static_cast<size_t>(p);
  auto *all = static_cast<char *>(whole.data);
  for (int64_t part = 0; part < p; ++part) {
    char *there = all + part * block;
    void *mine = parts[part].data;
    if (split)
      cudaMemcpy2DAsync(mine, block, there, pitch, block,
                        static_cast<size_t>(shape[0]), cudaMemcpyDeviceToDevice,
                        rows::streamOf(args));
    else
      cudaMemcpy2DAsync(there, pitch, mine, block, block,
                        static_cast<size_t>(shape[0]), cudaMemcpyDeviceToDevice,
                        rows::streamOf(args));
  }
}

void runSplitTokens(const KernelArgs &args) { copyTokenParts(args, true); }
void runJoinTokens(const KernelArgs &args) { copyTokenParts(args, false); }

} // namespace

absl::Status registerMoeKernels(KernelRegistry &registry) {
  using rows::Bf16;
  return addCudaKernels(
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
       {"moe_expert_counts", runExpertCounts},
       {"moe_block_counts", runBlockCounts},
       {"moe_ep_offsets", runEpOffsets},
       {"moe_aux_loss", runAuxLoss},
       {"moe_aux_loss_grad", runAuxLossGrad},
       {"moe_z_loss", runZLoss},
       {"moe_bias_update", runBiasUpdate},
       {"moe_z_loss_grad", runZLossGrad},
       {"moe_keep_rows", byStorage<runKeepRows<float>, runKeepRows<Bf16>>},
       {"moe_restore_rows",
        byStorage<runRestoreRows<float>, runRestoreRows<Bf16>>},
       {"moe_hot_experts", runHotExperts},
       {"moe_split_tokens", runSplitTokens},
       {"moe_join_tokens", runJoinTokens},
       {"moe_split_rows", byStorage<runSplitRows<float>, runSplitRows<Bf16>>},
       {"moe_merge_rows", byStorage<runMergeRows<float>, runMergeRows<Bf16>>},
       {"moe_permute", byStorage<runPermute<float>, runPermute<Bf16>>},
       {"moe_permute_grad",
        byStorage<runPermuteGrad<float>, runPermuteGrad<Bf16>>},
       {"moe_unpermute", byStorage<runUnpermute<float>, runUnpermute<Bf16>>},
       {"moe_unpermute_grad",
        byStorage<runUnpermuteGrad<float>, runUnpermuteGrad<Bf16>>},
       {"moe_grouped_linear",
        byStorage<runGroupedLinear<float>, runGroupedLinear<Bf16>>},
       {"moe_grouped_linear_grad_input",
        byStorage<runGroupedLinearGradInput<float>,
                  runGroupedLinearGradInput<Bf16>>},
       {"moe_grouped_linear_grad_weight",
        byStorage<runGroupedLinearGradWeight<float>,
                  runGroupedLinearGradWeight<Bf16>>},
       // Capacity mode's batched GEMMs: the same kernels without offsets
       // (E equal blocks of the rows).
       {"moe_batched_linear",
        byStorage<runGroupedLinear<float>, runGroupedLinear<Bf16>>},
       {"moe_batched_linear_grad_input",
        byStorage<runGroupedLinearGradInput<float>,
                  runGroupedLinearGradInput<Bf16>>},
       {"moe_batched_linear_grad_weight",
        byStorage<runGroupedLinearGradWeight<float>,
                  runGroupedLinearGradWeight<Bf16>>}});
}

} // namespace braid::cuda
