// cross_entropy and cross_entropy_grad_input on CUDA: mean softmax
// cross-entropy of logits [..., V] against i32 labels.
//
// Forward: one block per row computes the row's log-sum-exp (max, then the
// sum of exp(x - max), both fixed-order block reductions), saved in `lse`;
// then a single block adds the per-row losses lse - logits[label] in double,
// each thread over a fixed stride of rows and the threads in a fixed tree,
// and writes the mean. Labels outside [0, V) contribute no target logit and
// no one-hot term, exactly as on the CPU.
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::blockMax;
using rows::blockSum;
using rows::kBlock;
using rows::kWarps;
using rows::load;
using rows::store;

__device__ __forceinline__ bool validLabel(int32_t label, int64_t v) {
  return label >= 0 && label < v;
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    logSumExpKernel(const T *__restrict__ logits, int64_t numRows, int64_t v,
                    float *__restrict__ lse) {
  __shared__ float red[kWarps];
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const T *row = logits + r * v;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += kBlock)
      m = fmaxf(m, load(row, j));
    m = blockMax(m, red);
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < v; j += kBlock)
      acc += expf(load(row, j) - m);
    const float total = blockSum(acc, red);
    if (threadIdx.x == 0)
      lse[r] = m + logf(total);
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

// dlogits = factor * (exp(logits - lse) - onehot(label)), factor = scale /
// rows, one thread per element.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    crossEntropyGradKernel(const T *__restrict__ logits,
                           const int32_t *__restrict__ labels,
                           const float *__restrict__ lse, int64_t numRows,
                           int64_t v, float factor, T *__restrict__ dlogits) {
  const int64_t n = numRows * v;
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t r = i / v, j = i - r * v;
    float d = expf(load(logits, i) - lse[r]) * factor;
    const int32_t label = labels[r];
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

template <typename T> void runCrossEntropyGradInput(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t v = desc.lastDim(), numRows = desc.rows();
  if (v == 0 || numRows == 0)
    return;
  const float factor =
      static_cast<float>(rows::paramsOf(args).floatOr("scale", 1.0) /
                         static_cast<double>(numRows));
  crossEntropyGradKernel<T><<<rows::gridFor(numRows * v, kBlock * 4), kBlock,
                              0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), args.ins[1].i32(), args.ins[2].f32(),
      numRows, v, factor, rows::dataOf<T>(args.outs[0]));
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
      });
}

} // namespace braid::cuda
