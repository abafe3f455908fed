// Fused norm, activation, dropout and RoPE kernels on CUDA (docs/fusion.md).
//
// The formulas of kernels/cpu/FusedElementwise.cpp, computed in f32 with
// each stored output rounded once:
// - add + norm: one block per row (grid-stride over rows), as Norms.cu. The
//   sum residual + dropout(branch) is recomputed from the inputs in each
//   pass over the row instead of being read back from its (possibly bf16)
//   output, so the norm sees the f32 sum. Statistics are fixed-order block
//   sums, so results do not depend on the launch size.
// - the bias kernels: one thread per element, grid-stride; the bias is
//   indexed by the element's column.
// - RoPE in the projection's epilogue: the projection's GEMM (GemmProblem.h,
//   as the linear kernels run it), then the rotation in place, one thread
//   per (position, pair) as Rope.cu. In bf16 the projection is stored
//   rounded before it is rotated. The gradient rotates back into its second
//   output, then runs linear_grad_input's GEMM on it.
//
// Dropout masks come from rng::dropoutKey(seed, rng_offset, step,
// micro_batch) with the step values read from device memory, as in
// Elementwise.cu, so a captured CUDA graph draws each step's mask.
#include <cmath>
#include <cstdint>

#include "kernels/common/DrawIndex.h"
#include "kernels/common/Random.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/ExpFloat.h"
#include "kernels/cuda/GemmProblem.h"
#include "kernels/cuda/RopeRotate.cuh"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::blockSum;
using rows::kBlock;
using rows::kWarps;
using rows::load;
using rows::store;

// The dropout of a fused kernel: keep element i iff its 24 random bits are
// >= threshold, scale kept elements (kernels/cpu/DropoutMask.h).
struct Mask {
  bool active = false;
  uint64_t threshold = 0;
  float scale = 1.0f;
  int64_t rngOffset = 0;
  int64_t microBatch = 0; // the launch's micro-batch: part of the key
  // Draw index of element i (tp_dim: its index in the whole tensor).
  DrawIndex index;
};

// `x`: the operand whose elements the draws are over.
Mask maskOf(const KernelArgs &args, const TensorDesc &x) {
  const KernelParams &params = rows::paramsOf(args);
  const double p = params.floatOr("p", 0.0);
  Mask m;
  m.active = p > 0;
  m.threshold = static_cast<uint64_t>(std::ceil(p * 16777216.0));
  m.scale = 1.0f / (1.0f - static_cast<float>(p));
  m.rngOffset = params.intOr("rng_offset", 0);
  m.microBatch = args.microBatch;
  m.index = DrawIndex::of(args, x);
  return m;
}

__device__ __forceinline__ uint64_t keyOf(const Mask &mask,
                                          const StepValues *steps) {
  return steps ? rng::dropoutKey(steps->seed, mask.rngOffset, steps->step,
                                 mask.microBatch)
               : rng::dropoutKey(0, mask.rngOffset, 1, 0);
}

__device__ __forceinline__ float factor(const Mask &mask, uint64_t key,
                                        int64_t i) {
  return (rng::draw(key, static_cast<uint64_t>(mask.index.at(i))) >> 40) >=
                 mask.threshold
             ? mask.scale
             : 0.0f;
}

// --- add + norm --------------------------------------------------------------

template <typename T>
__device__ __forceinline__ float sumAt(const T *res, const T *br, int64_t i,
                                       const Mask &mask, uint64_t key) {
  const float b = load(br, i);
  return load(res, i) + (mask.active ? b * factor(mask, key, i) : b);
}

template <typename T, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    addNormForward(const T *__restrict__ res, const T *__restrict__ br,
                   const T *__restrict__ gamma, const T *__restrict__ beta,
                   float eps, Mask mask, const StepValues *steps,
                   int64_t numRows, int64_t d, T *__restrict__ sum,
                   T *__restrict__ y, float *__restrict__ mean,
                   float *__restrict__ rstd) {
  __shared__ float red[kWarps];
  const uint64_t key = keyOf(mask, steps);
  const float fd = static_cast<float>(d);
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const int64_t base = r * d;
    float m = 0.0f;
    if (kLayer) {
      float acc = 0.0f;
      for (int64_t j = threadIdx.x; j < d; j += kBlock)
        acc += sumAt(res, br, base + j, mask, key);
      m = blockSum(acc, red) / fd;
    }
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float t = sumAt(res, br, base + j, mask, key) - m;
      sq += t * t;
    }
    const float s = 1.0f / sqrtf(blockSum(sq, red) / fd + eps);
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float x = sumAt(res, br, base + j, mask, key);
      store(sum, base + j, x);
      const float v = (x - m) * s * load(gamma, j);
      store(y, base + j, kLayer ? v + load(beta, j) : v);
    }
    if (threadIdx.x == 0) {
      if (kLayer)
        mean[r] = m;
      rstd[r] = s;
    }
  }
}

// dx = dres + rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <typename T, bool kLayer>
__global__ void __launch_bounds__(kBlock)
    addNormGradInput(const T *__restrict__ dy, const T *__restrict__ x,
                     const T *__restrict__ gamma,
                     const float *__restrict__ mean,
                     const float *__restrict__ rstd,
                     const T *__restrict__ dres, int64_t numRows, int64_t d,
                     T *__restrict__ dx) {
  __shared__ float red[kWarps];
  const float invD = 1.0f / static_cast<float>(d);
  for (int64_t r = blockIdx.x; r < numRows; r += gridDim.x) {
    const int64_t base = r * d;
    const float m = kLayer ? mean[r] : 0.0f, s = rstd[r];
    float accG = 0.0f, accGX = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float g = load(dy, base + j) * load(gamma, j);
      accG += g;
      accGX += g * ((load(x, base + j) - m) * s);
    }
    const float meanG = kLayer ? blockSum(accG, red) * invD : 0.0f;
    const float meanGX = blockSum(accGX, red) * invD;
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float xhat = (load(x, base + j) - m) * s;
      store(dx, base + j,
            load(dres, base + j) +
                s * (load(dy, base + j) * load(gamma, j) - meanG -
                     xhat * meanGX));
    }
  }
}

template <typename T, bool kLayer> void runAddNorm(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[0].desc;
  const int64_t d = xd.lastDim(), numRows = xd.rows();
  if (d == 0 || numRows == 0)
    return;
  const float eps =
      static_cast<float>(rows::paramsOf(args).floatOr("eps", 1e-5));
  const T *beta = kLayer ? rows::dataOf<T>(args.ins[3]) : nullptr;
  float *mean = kLayer ? args.outs[2].f32() : nullptr;
  float *rstd = args.outs[kLayer ? 3 : 2].f32();
  addNormForward<T, kLayer>
      <<<rows::gridFor(numRows, 1), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
          rows::dataOf<T>(args.ins[2]), beta, eps,
          maskOf(args, *args.ins[1].desc), rows::stepValuesOf(args), numRows,
          d, rows::dataOf<T>(args.outs[0]),
          rows::dataOf<T>(args.outs[1]), mean, rstd);
}

template <typename T, bool kLayer>
void runAddNormGrad(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[1].desc;
  const int64_t d = xd.lastDim(), numRows = xd.rows();
  if (d == 0 || numRows == 0)
    return;
  const float *mean = kLayer ? args.ins[3].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 4 : 3].f32();
  addNormGradInput<T, kLayer>
      <<<rows::gridFor(numRows, 1), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
          rows::dataOf<T>(args.ins[2]), mean, rstd,
          rows::dataOf<T>(args.ins[kLayer ? 5 : 4]), numRows, d,
          rows::dataOf<T>(args.outs[0]));
}

// --- bias + GELU, bias + SwiGLU, bias + dropout + add -------------------------

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float tanhViaExp(float u) {
  return 1.0f - 2.0f / (expf32::expFloat(2.0f * u) + 1.0f);
}
__device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf32::expFloat(-g));
}

#define BRAID_FUSED_GRID_STRIDE(i, n)                                          \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n);    \
       i += int64_t{gridDim.x} * blockDim.x)

template <typename T>
__global__ void __launch_bounds__(kBlock)
    biasGelu(const T *__restrict__ h, const T *__restrict__ b, int64_t n,
             int64_t m, T *__restrict__ y) {
  BRAID_FUSED_GRID_STRIDE(i, n) {
    const float v = load(h, i) + load(b, i % m);
    const float t = tanhViaExp(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    store(y, i, 0.5f * v * (1.0f + t));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    biasGeluGrad(const T *__restrict__ dy, const T *__restrict__ h,
                 const T *__restrict__ b, int64_t n, int64_t m,
                 T *__restrict__ dx) {
  BRAID_FUSED_GRID_STRIDE(i, n) {
    const float v = load(h, i) + load(b, i % m);
    const float t = tanhViaExp(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    store(dx, i,
          load(dy, i) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    biasSwiglu(const T *__restrict__ gate, const T *__restrict__ up,
               const T *__restrict__ bg, const T *__restrict__ bu, int64_t n,
               int64_t m, T *__restrict__ y) {
  BRAID_FUSED_GRID_STRIDE(i, n) {
    const float g = load(gate, i) + load(bg, i % m);
    store(y, i, g * sigmoid(g) * (load(up, i) + load(bu, i % m)));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    biasSwigluGrad(const T *__restrict__ dy, const T *__restrict__ gate,
                   const T *__restrict__ up, const T *__restrict__ bg,
                   const T *__restrict__ bu, int64_t n, int64_t m,
                   T *__restrict__ dgate, T *__restrict__ dup) {
  BRAID_FUSED_GRID_STRIDE(i, n) {
    const float g = load(gate, i) + load(bg, i % m);
    const float u = load(up, i) + load(bu, i % m);
    const float s = sigmoid(g), d = load(dy, i);
    store(dgate, i, d * u * (s * (1.0f + g * (1.0f - s))));
    store(dup, i, d * (g * s));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    biasDropoutAdd(const T *__restrict__ h, const T *__restrict__ b,
                   const T *__restrict__ res, Mask mask,
                   const StepValues *steps, int64_t n, int64_t m,
                   T *__restrict__ y) {
  const uint64_t key = keyOf(mask, steps);
  BRAID_FUSED_GRID_STRIDE(i, n) {
    const float v = load(h, i) + load(b, i % m);
    store(y, i, load(res, i) + (mask.active ? v * factor(mask, key, i) : v));
  }
}

// Elements and the bias length of a launch whose input `in` is [..., M].
struct Span {
  int64_t n, m;
};
Span spanOf(const TensorView &in) {
  return {in.numel(), in.desc->lastDim()};
}

unsigned elementGrid(int64_t n) { return rows::gridFor(n, kBlock * 4); }

template <typename T> void runBiasGelu(const KernelArgs &args) {
  const Span s = spanOf(args.ins[0]);
  if (s.n == 0)
    return;
  biasGelu<T><<<elementGrid(s.n), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]), s.n, s.m,
      rows::dataOf<T>(args.outs[0]));
}

template <typename T> void runBiasGeluGrad(const KernelArgs &args) {
  const Span s = spanOf(args.ins[1]);
  if (s.n == 0)
    return;
  biasGeluGrad<T><<<elementGrid(s.n), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
      rows::dataOf<T>(args.ins[2]), s.n, s.m, rows::dataOf<T>(args.outs[0]));
}

template <typename T> void runBiasSwiglu(const KernelArgs &args) {
  const Span s = spanOf(args.ins[0]);
  if (s.n == 0)
    return;
  biasSwiglu<T><<<elementGrid(s.n), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
      rows::dataOf<T>(args.ins[2]), rows::dataOf<T>(args.ins[3]), s.n, s.m,
      rows::dataOf<T>(args.outs[0]));
}

template <typename T> void runBiasSwigluGrad(const KernelArgs &args) {
  const Span s = spanOf(args.ins[1]);
  if (s.n == 0)
    return;
  biasSwigluGrad<T><<<elementGrid(s.n), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
      rows::dataOf<T>(args.ins[2]), rows::dataOf<T>(args.ins[3]),
      rows::dataOf<T>(args.ins[4]), s.n, s.m, rows::dataOf<T>(args.outs[0]),
      rows::dataOf<T>(args.outs[1]));
}

template <typename T> void runBiasDropoutAdd(const KernelArgs &args) {
  const Span s = spanOf(args.ins[0]);
  if (s.n == 0)
    return;
  biasDropoutAdd<T><<<elementGrid(s.n), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
      rows::dataOf<T>(args.ins[2]), maskOf(args, *args.ins[0].desc),
      rows::stepValuesOf(args), s.n, s.m, rows::dataOf<T>(args.outs[0]));
}

// --- RoPE in the projection's epilogue ----------------------------------------

template <typename T>
void rotate(const KernelArgs &args, T *x, const TensorDesc &desc, int sign) {
  const int64_t batch = desc.shape[0], seq = desc.shape[1],
                width = desc.shape[2];
  const KernelParams &params = rows::paramsOf(args);
  const int64_t heads = params.intOr("num_heads", 1);
  const double theta = params.floatOr("theta", 10000.0);
  const int64_t half = heads > 0 ? width / heads / 2 : 0;
  if (batch == 0 || seq == 0 || half == 0)
    return;
  // In place, with the angles of rope (RopeRotate.cuh).
  rope::rotateKernel<T>
      <<<rows::gridFor(seq * half, kBlock), kBlock, 0, rows::streamOf(args)>>>(
          x, x, batch, rope::positionsOf(args, seq), width, half, theta,
          static_cast<float>(sign));
}

// As copyKernel of Elementwise.cu: the storage bits, unchanged.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    copyElements(const T *__restrict__ x, T *__restrict__ y, int64_t n) {
  BRAID_FUSED_GRID_STRIDE(i, n) { y[i] = x[i]; }
}

template <typename T> void runLinearRope(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1], &y = args.outs[0];
  const int64_t n = x.desc->shape[0] * x.desc->shape[1];
  const int64_t k = x.desc->lastDim(), m = w.desc->shape[0];
  if (n == 0 || m == 0)
    return;
  GemmProblem p =
      linearForward(n, m, k, x.desc->dtype, w.desc->dtype, y.desc->dtype);
  GemmOperands ops;
  ops.a = w.data;
  ops.b = x.data;
  ops.c = y.data;
  if (args.ins.size() == 3) {
    p.epilogue = GemmEpilogue::kBias;
    p.biasType = args.ins[2].desc->dtype;
    ops.bias = args.ins[2].data;
  }
  enqueueGemm(*args.ctx->gpu, p, ops);
  rotate<T>(args, rows::dataOf<T>(y), *y.desc, 1);
}

template <typename T> void runLinearRopeGrad(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &w = args.ins[1];
  const TensorView &dx = args.outs[0], &dl = args.outs[1];
  const int64_t n = dy.desc->shape[0] * dy.desc->shape[1];
  const int64_t m = dy.desc->lastDim(), k = w.desc->shape[1];
  if (n == 0)
    return;
  copyElements<T><<<elementGrid(n * m), kBlock, 0, rows::streamOf(args)>>>(
      rows::dataOf<T>(dy), rows::dataOf<T>(dl), n * m);
  rotate<T>(args, rows::dataOf<T>(dl), *dl.desc, -1);
  if (k == 0)
    return;
  const GemmProblem p = linearGradInput(n, m, k, dl.desc->dtype,
                                        w.desc->dtype, dx.desc->dtype, false);
  GemmOperands ops;
  ops.a = w.data;
  ops.b = dl.data;
  ops.c = dx.data;
  enqueueGemm(*args.ctx->gpu, p, ops);
}

} // namespace

absl::Status registerFusedElementwiseKernels(KernelRegistry &registry) {
  return addCudaKernels(
      registry,
      {
          {"fused_add_layer_norm",
           byStorage<runAddNorm<float, true>, runAddNorm<Bf16, true>>},
          {"fused_add_layer_norm_grad_input",
           byStorage<runAddNormGrad<float, true>, runAddNormGrad<Bf16, true>>},
          {"fused_add_rms_norm",
           byStorage<runAddNorm<float, false>, runAddNorm<Bf16, false>>},
          {"fused_add_rms_norm_grad_input",
           byStorage<runAddNormGrad<float, false>,
                     runAddNormGrad<Bf16, false>>},
          {"fused_bias_swiglu",
           byStorage<runBiasSwiglu<float>, runBiasSwiglu<Bf16>>},
          {"fused_bias_swiglu_grad_input",
           byStorage<runBiasSwigluGrad<float>, runBiasSwigluGrad<Bf16>>},
          {"fused_linear_rope",
           byStorage<runLinearRope<float>, runLinearRope<Bf16>>},
          {"fused_linear_rope_grad_input",
           byStorage<runLinearRopeGrad<float>, runLinearRopeGrad<Bf16>>},
          {"fused_bias_gelu", byStorage<runBiasGelu<float>, runBiasGelu<Bf16>>},
          {"fused_bias_gelu_grad_input",
           byStorage<runBiasGeluGrad<float>, runBiasGeluGrad<Bf16>>},
          {"fused_bias_dropout_add",
           byStorage<runBiasDropoutAdd<float>, runBiasDropoutAdd<Bf16>>},
      });
}

} // namespace braid::cuda
