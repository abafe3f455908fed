// cross_entropy and cross_entropy_grad_input on CUDA: mean softmax
// cross-entropy of logits [..., V] against i32 labels.
//
// Forward: one block per row computes the row's log-sum-exp (max, then the
// sum of exp(x - max), both fixed-order block reductions), saved in `lse`;
// then a single block adds the per-row losses lse - logits[label] in double,
// each thread over a fixed stride of rows and the threads in a fixed tree,
// and writes the mean. Labels outside [0, V) contribute no target logit and
// no one-hot term, exactly as on the CPU.
//
// Vocabulary-parallel cross-entropy (CrossEntropy.cpp has the scheme):
// cross_entropy_stats takes one block per row of the rank's shard, as the
// forward's first kernel; cross_entropy_combine one thread per row for the
// lse (in double over the ranks in order), then one block for the mean, as
// above; cross_entropy_grad_input with vocab_shard shifts the label by the
// shard's first id. The TP coordinate never changes between runs of a
// rank's program, so it is a launch argument even in a captured graph.
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::blockSum;
using rows::kBlock;
using rows::kWarps;
using rows::load;
using rows::rowMaxAndSum;
using rows::store;

__device__ __forceinline__ bool validLabel(int64_t label, int64_t v) {
  return label >= 0 && label < v;
}

// The vocabulary id of column 0 of the launch's logits [..., v].
int64_t firstColumnOf(const KernelArgs &args, int64_t v, bool sharded) {
  return sharded && args.ctx != nullptr ? args.ctx->tpRank * v : 0;
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    logSumExpKernel(const T *__restrict__ logits, int64_t numRows, int64_t v,
                    float *__restrict__ lse) {
  __shared__ float red[kWarps];
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const float2 ms = rowMaxAndSum(logits + r * v, v, red);
    if (threadIdx.x == 0)
      lse[r] = ms.x + logf(ms.y);
  }
}

// One block: loss = mean over rows of lse - logits[label], summed in double.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    meanLossKernel(const T *__restrict__ logits,
                   const int32_t *__restrict__ labels,
                   const float *__restrict__ lse, int64_t numRows, int64_t v,
                   float *__restrict__ loss) {
  __shared__ double red[kWarps];
  double acc = 0.0;
  for (int64_t r = threadIdx.x; r < numRows; r += kBlock) {
    const int32_t label = labels[r];
    const double target =
        validLabel(label, v) ? static_cast<double>(load(logits, r * v + label))
                             : 0.0;
    acc += static_cast<double>(lse[r]) - target;
  }
  const double total = blockSum(acc, red);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(total / static_cast<double>(numRows));
}

// stats[r] = (max m, sum of exp(x - m), the logit of the label's column
// label - first or 0 outside the shard), one block per row.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    statsKernel(const T *__restrict__ logits,
                const int32_t *__restrict__ labels, int64_t numRows,
                int64_t v, int64_t first, float *__restrict__ stats) {
  __shared__ float red[kWarps];
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const T *row = logits + r * v;
    const float2 ms = rowMaxAndSum(row, v, red);
    if (threadIdx.x == 0) {
      const int64_t label = labels[r] - first;
      stats[3 * r] = ms.x;
      stats[3 * r + 1] = ms.y;
      stats[3 * r + 2] = validLabel(label, v) ? load(row, label) : 0.0f;
    }
  }
}

// lse[r] = M + log(sum_p s_p exp(m_p - M)), M = max_p m_p, over the ranks
// in order in double; rank p's stats of row r are at p * numRows + r.
__global__ void __launch_bounds__(kBlock)
    combineLseKernel(const float *__restrict__ stats, int64_t numRows,
                     int64_t ranks, float *__restrict__ lse) {
  for (int64_t r = blockIdx.x * int64_t{kBlock} + threadIdx.x; r < numRows;
       r += int64_t{gridDim.x} * kBlock) {
    double m = stats[3 * r];
    for (int64_t p = 1; p < ranks; ++p)
      m = fmax(m, static_cast<double>(stats[3 * (p * numRows + r)]));
    double total = 0.0;
    for (int64_t p = 0; p < ranks; ++p) {
      const float *st = stats + 3 * (p * numRows + r);
      total += static_cast<double>(st[1]) * exp(st[0] - m);
    }
    lse[r] = static_cast<float>(m + log(total));
  }
}

// One block: loss = mean over rows of lse - (the ranks' targets summed in
// order), in double, as meanLossKernel.
__global__ void __launch_bounds__(kBlock)
    combineLossKernel(const float *__restrict__ stats,
                      const float *__restrict__ lse, int64_t numRows,
                      int64_t ranks, float *__restrict__ loss) {
  __shared__ double red[kWarps];
  double acc = 0.0;
  for (int64_t r = threadIdx.x; r < numRows; r += kBlock) {
    double target = 0.0;
    for (int64_t p = 0; p < ranks; ++p)
      target += static_cast<double>(stats[3 * (p * numRows + r) + 2]);
    acc += static_cast<double>(lse[r]) - target;
  }
  const double total = blockSum(acc, red);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(total / static_cast<double>(numRows));
}

// dlogits = factor * (exp(logits - lse) - onehot(label - first)), factor =
// scale / rows, one thread per element.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    crossEntropyGradKernel(const T *__restrict__ logits,
                           const int32_t *__restrict__ labels,
                           const float *__restrict__ lse, int64_t numRows,
                           int64_t v, int64_t first, float factor,
                           T *__restrict__ dlogits) {
  const int64_t n = numRows * v;
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t r = i / v, j = i - r * v;
    float d = expf(load(logits, i) - lse[r]) * factor;
    const int64_t label = labels[r] - first;
    if (validLabel(label, v) && j == label)
      d -= factor;
    store(dlogits, i, d);
  }
}

template <typename T> void runCrossEntropy(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t v = desc.lastDim(), numRows = desc.rows();
  if (v == 0 || numRows == 0)
    return;
  cudaStream_t stream = rows::streamOf(args);
  const T *logits = rows::dataOf<T>(args.ins[0]);
  float *lse = args.outs[1].f32();
  logSumExpKernel<T><<<rows::gridFor(numRows, 1), kBlock, 0, stream>>>(
      logits, numRows, v, lse);
  meanLossKernel<T><<<1, kBlock, 0, stream>>>(logits, args.ins[1].i32(), lse,
                                              numRows, v, args.outs[0].f32());
}

template <typename T> void runCrossEntropyStats(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t v = desc.lastDim(), numRows = desc.rows();
  if (v == 0 || numRows == 0)
    return;
  statsKernel<T><<<rows::gridFor(numRows, 1), kBlock, 0,
                   rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), args.ins[1].i32(), numRows, v,
      firstColumnOf(args, v, true), args.outs[0].f32());
}

void runCrossEntropyCombine(const KernelArgs &args) {
  const int64_t numRows = args.ins[1].numel();
  if (numRows == 0)
    return;
  const int64_t ranks =
      args.ins[0].desc->shape[0] / args.ins[1].desc->shape[0];
  cudaStream_t stream = rows::streamOf(args);
  const float *stats = args.ins[0].f32();
  float *lse = args.outs[1].f32();
  combineLseKernel<<<rows::gridFor(numRows, kBlock), kBlock, 0, stream>>>(
      stats, numRows, ranks, lse);
  combineLossKernel<<<1, kBlock, 0, stream>>>(stats, lse, numRows, ranks,
                                              args.outs[0].f32());
}

template <typename T> void runCrossEntropyGradInput(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t v = desc.lastDim(), numRows = desc.rows();
  if (v == 0 || numRows == 0)
    return;
  const float factor =
      static_cast<float>(rows::paramsOf(args).floatOr("scale", 1.0) /
                         static_cast<double>(numRows));
  const int64_t first = firstColumnOf(
      args, v, rows::paramsOf(args).intOr("vocab_shard", 0) != 0);
  crossEntropyGradKernel<T><<<rows::gridFor(numRows * v, kBlock * 4), kBlock,
                              0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), args.ins[1].i32(), args.ins[2].f32(),
      numRows, v, first, factor, rows::dataOf<T>(args.outs[0]));
}

} // namespace

absl::Status registerCrossEntropyKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"cross_entropy",
           byStorage<runCrossEntropy<float>, runCrossEntropy<Bf16>>},
          {"cross_entropy_grad_input",
           byStorage<runCrossEntropyGradInput<float>,
                     runCrossEntropyGradInput<Bf16>>},
          {"cross_entropy_stats",
           byStorage<runCrossEntropyStats<float>, runCrossEntropyStats<Bf16>>},
          {"cross_entropy_combine", runCrossEntropyCombine},
      });
}

} // namespace braid::cuda
