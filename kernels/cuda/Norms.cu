// layer_norm and rms_norm with their input and weight gradients, on CUDA.
//
// One block per row (grid-stride over rows) for the forward and input
// gradient kernels; statistics in f32, reduced by fixed-order block sums.
// The weight gradients sum over rows in two stages (LaunchPlan.h,
// planColumnSplit): each chunk of consecutive rows adds its rows in order
// into per-column partials in the workspace, then a second kernel adds the
// partials of each column in chunk order. With one chunk the first stage
// writes the output and no workspace is used.
//
// Workspace: norm weight gradients use planColumnSplit's bytes, at most
// 128 * D * outputs * 4 (1 KiB per column for layer_norm); with less (or
// none) they use fewer chunks, down to one.
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/LaunchPlan.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::blockSum;
using rows::kBlock;
using rows::kWarps;
using rows::load;
using rows::store;

// y = (x - mean) * rstd * gamma + beta (layer) or x * rstd * gamma (rms).
// The mean, then the centred squares: two passes, as on the CPU.
template <typename T, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    normForward(const T *__restrict__ x, const T *__restrict__ gamma,
                const T *__restrict__ beta, float eps, int64_t numRows,
                int64_t d, T *__restrict__ y, float *__restrict__ mean,
                float *__restrict__ rstd) {
  __shared__ float red[kWarps];
  const float fd = static_cast<float>(d);
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const T *xr = x + r * d;
    T *yr = y + r * d;
    float m = 0.0f;
    if (kLayer) {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < d; j += kBlock)
        acc += load(xr, j);
      m = blockSum(acc, red) / fd;
    }
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float t = load(xr, j) - m;
      sq += t * t;
    }
    const float s = 1.0f / sqrtf(blockSum(sq, red) / fd + eps);
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float v = (load(xr, j) - m) * s * load(gamma, j);
      store(yr, j, kLayer ? v + load(beta, j) : v);
    }
    if (threadIdx.x == 0) {
      if (kLayer)
        mean[r] = m;
      rstd[r] = s;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
// xhat = (x - mean) * rstd; rms_norm has mean 0 and no mean(g).
template <typename T, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    normGradInput(const T *__restrict__ dy, const T *__restrict__ x,
                  const T *__restrict__ gamma, const float *__restrict__ mean,
                  const float *__restrict__ rstd, int64_t numRows, int64_t d,
                  T *__restrict__ dx) {
  __shared__ float red[kWarps];
  const float invD = 1.0f / static_cast<float>(d);
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const T *dyr = dy + r * d;
    const T *xr = x + r * d;
    T *dxr = dx + r * d;
    const float m = kLayer ? mean[r] : 0.0f, s = rstd[r];
    float accG = 0.0f, accGX = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float g = load(dyr, j) * load(gamma, j);
      accG += g;
      accGX += g * ((load(xr, j) - m) * s);
    }
    const float meanG = kLayer ? blockSum(accG, red) * invD : 0.0f;
    const float meanGX = blockSum(accGX, red) * invD;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float xhat = (load(xr, j) - m) * s;
      store(dxr, j, s * (load(dyr, j) * load(gamma, j) - meanG - xhat * meanGX));
    }
  }
}

// The output of a weight gradient: overwritten, or added to exactly (an f32
// gradient) or with one rounding (a bf16 one).
template <typename O>
__device__ __forceinline__ void writeGrad(O *out, int64_t i, float v,
                                          bool accumulate) {
  store(out, i, accumulate ? load(out, i) + v : v);
}

// Stage 1: chunk blockIdx.y sums rows [chunk * rowsPerChunk, ...) in order,
// one thread per column. With `partials` null it writes the outputs;
// otherwise partial (chunk, output, column) at
// partials[(chunk * outputs + output) * d + column].
template <typename T, typename O, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    normGradWeightChunks(const T *__restrict__ dy, const T *__restrict__ x,
                         const float *__restrict__ mean,
                         const float *__restrict__ rstd, int64_t numRows,
                         int64_t d, int64_t rowsPerChunk,
                         float *__restrict__ partials, O *__restrict__ dgamma,
                         O *__restrict__ dbeta, bool accumulate) {
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rowsPerChunk;
  const int64_t r1 = min(numRows, r0 + rowsPerChunk);
  constexpr int kOutputs = kLayer ? 2 : 1;
  for (int64_t c = blockIdx.x * int64_t{kBlock} + threadIdx.x; c < d;
       c += int64_t{gridDim.x} * kBlock) {
    float accG = 0.0f, accB = 0.0f;
    for (int64_t r = r0; r < r1; ++r) {
      const float m = kLayer ? mean[r] : 0.0f, s = rstd[r];
      const float g = load(dy, r * d + c);
      accG += g * ((load(x, r * d + c) - m) * s);
      if (kLayer)
        accB += g;
    }
    if (partials) {
      partials[(chunk * kOutputs) * d + c] = accG;
      if (kLayer)
        partials[(chunk * kOutputs + 1) * d + c] = accB;
    } else {
      writeGrad(dgamma, c, accG, accumulate);
      if (kLayer)
        writeGrad(dbeta, c, accB, accumulate);
    }
  }
}

// Stage 2: each column's partials added in chunk order.
template <typename O, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    normGradWeightCombine(const float *__restrict__ partials, int64_t chunks,
                          int64_t d, O *__restrict__ dgamma,
                          O *__restrict__ dbeta, bool accumulate) {
  constexpr int kOutputs = kLayer ? 2 : 1;
  for (int64_t c = blockIdx.x * int64_t{kBlock} + threadIdx.x; c < d;
       c += int64_t{gridDim.x} * kBlock) {
    float accG = 0.0f, accB = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      accG += partials[(k * kOutputs) * d + c];
      if (kLayer)
        accB += partials[(k * kOutputs + 1) * d + c];
    }
    writeGrad(dgamma, c, accG, accumulate);
    if (kLayer)
      writeGrad(dbeta, c, accB, accumulate);
  }
}

// --- host side ---------------------------------------------------------------

template <typename T, bool kLayer> void runForward(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[0].desc;
  const int64_t d = xd.lastDim(), numRows = xd.rows();
  if (d == 0 || numRows == 0)
    return;
  const float eps = static_cast<float>(rows::paramsOf(args).floatOr("eps", 1e-5));
  const T *beta = kLayer ? rows::dataOf<T>(args.ins[2]) : nullptr;
  float *mean = kLayer ? args.outs[1].f32() : nullptr;
  float *rstd = args.outs[kLayer ? 2 : 1].f32();
  normForward<T, kLayer>
      <<<rows::gridFor(numRows, 1), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]), beta,
          eps, numRows, d, rows::dataOf<T>(args.outs[0]), mean, rstd);
}

template <typename T, bool kLayer> void runGradInput(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[1].desc;
  const int64_t d = xd.lastDim(), numRows = xd.rows();
  if (d == 0 || numRows == 0)
    return;
  const float *mean = kLayer ? args.ins[3].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 4 : 3].f32();
  normGradInput<T, kLayer>
      <<<rows::gridFor(numRows, 1), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
          rows::dataOf<T>(args.ins[2]), mean, rstd, numRows, d,
          rows::dataOf<T>(args.outs[0]));
}

template <typename T, typename O, bool kLayer>
void runGradWeightTyped(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[1].desc;
  const int64_t d = xd.lastDim(), numRows = xd.rows();
  if (d == 0)
    return;
  const bool accumulate = rows::paramsOf(args).intOr("accumulate", 0) != 0;
  const float *mean = kLayer ? args.ins[2].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 3 : 2].f32();
  O *dgamma = rows::dataOf<O>(args.outs[0]);
  O *dbeta = kLayer ? rows::dataOf<O>(args.outs[1]) : nullptr;
  const GpuContext *gpu = args.ctx ? args.ctx->gpu : nullptr;
  const size_t wsBytes = gpu && gpu->workspace ? gpu->workspaceBytes : 0;
  const ColumnSplit split = planColumnSplit(numRows, d, kLayer ? 2 : 1, wsBytes);
  const int64_t rowsPerChunk =
      split.chunks > 1 ? split.rowsPerChunk : (numRows > 0 ? numRows : 1);
  float *partials =
      split.chunks > 1 ? static_cast<float *>(gpu->workspace) : nullptr;
  cudaStream_t stream = rows::streamOf(args);
  const unsigned colBlocks = rows::gridFor(d, kBlock);
  const dim3 grid(colBlocks, static_cast<unsigned>(split.chunks));
  normGradWeightChunks<T, O, kLayer><<<grid, kBlock, 0, stream>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]), mean, rstd,
      numRows, d, rowsPerChunk, partials, dgamma, dbeta, accumulate);
  if (partials)
    normGradWeightCombine<O, kLayer><<<colBlocks, kBlock, 0, stream>>>(
        partials, split.chunks, d, dgamma, dbeta, accumulate);
}

template <bool kLayer> void runGradWeight(const KernelArgs &args) {
  const bool inBf16 = rows::isBf16(args.ins[0]);
  const bool outBf16 = rows::isBf16(args.outs[0]);
  if (!inBf16)
    runGradWeightTyped<float, float, kLayer>(args);
  else if (outBf16)
    runGradWeightTyped<Bf16, Bf16, kLayer>(args);
  else
    runGradWeightTyped<Bf16, float, kLayer>(args);
}

} // namespace

absl::Status registerNormKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"layer_norm",
           byStorage<runForward<float, true>, runForward<Bf16, true>>},
          {"layer_norm_grad_input",
           byStorage<runGradInput<float, true>, runGradInput<Bf16, true>>},
          {"layer_norm_grad_weight", runGradWeight<true>},
          {"rms_norm",
           byStorage<runForward<float, false>, runForward<Bf16, false>>},
          {"rms_norm_grad_input",
           byStorage<runGradInput<float, false>, runGradInput<Bf16, false>>},
          {"rms_norm_grad_weight", runGradWeight<false>},
      });
}

} // namespace braid::cuda
