// Element-wise kernels on CUDA: gelu, swiglu, add, dropout, split and their
// gradients. Each thread walks the flat index range with a grid-stride
// loop (four elements per load and store where the tensors are aligned for
// it); elements are independent, so results do not depend on the launch
// size. Formulas are those of kernels/cpu/Elementwise.cpp, computed in f32.
//
// Dropout draws its mask from rng::dropoutKey(seed, rng_offset, step,
// micro_batch) with the seed and step read from device memory
// (GpuContext::stepValues), so a captured CUDA graph draws each step's
// mask; the micro-batch is the launch's own (KernelArgs::microBatch), and
// so is the TP coordinate that `tp_dim` reads (the same on every run of a
// rank's program).
//
// This file is compiled with --fmad=false (CMakeLists.txt) and takes exp
// from ExpFloat.h: every formula is the CPU's sequence of correctly rounded
// f32 operations, so the results are the CPU's bit for bit. That matters
// for gelu and swiglu, whose formulas cancel terms (1 + tanh(u) for u far
// below 0): a last-place difference in exp there becomes a relative error
// of 1e-2 in the result.
#include <cmath>
#include <cstdint>

#include "kernels/common/DrawIndex.h"
#include "kernels/common/Random.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/ExpFloat.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::kBlock;
using rows::load;
using rows::store;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// Elements handled per thread before the grid-stride loop wraps: keeps the
// grid at a sensible size for small tensors.
constexpr int64_t kPerThread = 4;

inline unsigned elementGrid(int64_t n) {
  return rows::gridFor(n, kBlock * kPerThread);
}

#define BRAID_GRID_STRIDE(i, n)                                                \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n);    \
       i += int64_t{gridDim.x} * blockDim.x)

// tanh(u) = 1 - 2 / (exp(2u) + 1), as on the CPU: exact limits at both ends.
__device__ __forceinline__ float tanhViaExp(float u) {
  return 1.0f - 2.0f / (expf32::expFloat(2.0f * u) + 1.0f);
}

__device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf32::expFloat(-g));
}

// --- the element-wise map --------------------------------------------------
//
// mapKernel applies an operation with kIns inputs and kOuts outputs of one
// storage type to every flat index. When every pointer is aligned to four
// elements it loads and stores four elements at once (float4 for f32, 8
// bytes for bf16), and the last n % 4 elements go through the scalar path.
// The operation sees f32 values and the flat index.

template <typename T, int N> struct Pointers {
  T *p[N > 0 ? N : 1];
};

__device__ __forceinline__ void load4(const float *p, int64_t i, float *v) {
  const float4 t = *reinterpret_cast<const float4 *>(p + i);
  v[0] = t.x;
  v[1] = t.y;
  v[2] = t.z;
  v[3] = t.w;
}
// Element i sits in the low half of the first word (little-endian).
__device__ __forceinline__ void load4(const Bf16 *p, int64_t i, float *v) {
  const uint2 t = *reinterpret_cast<const uint2 *>(p + i);
  v[0] = rows::widen(static_cast<Bf16>(t.x & 0xffffu));
  v[1] = rows::widen(static_cast<Bf16>(t.x >> 16));
  v[2] = rows::widen(static_cast<Bf16>(t.y & 0xffffu));
  v[3] = rows::widen(static_cast<Bf16>(t.y >> 16));
}
__device__ __forceinline__ void store4(float *p, int64_t i, const float *v) {
  *reinterpret_cast<float4 *>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(Bf16 *p, int64_t i, const float *v) {
  uint2 t;
  t.x = static_cast<uint32_t>(rows::roundToBf16(v[0])) |
        (static_cast<uint32_t>(rows::roundToBf16(v[1])) << 16);
  t.y = static_cast<uint32_t>(rows::roundToBf16(v[2])) |
        (static_cast<uint32_t>(rows::roundToBf16(v[3])) << 16);
  *reinterpret_cast<uint2 *>(p + i) = t;
}

template <typename T, typename Op, int kIns, int kOuts>
__global__ void __launch_bounds__(kBlock)
    mapKernel(Op op, Pointers<const T, kIns> in, Pointers<T, kOuts> out,
              int64_t n, bool vectorised, const StepValues *steps) {
  op.prepare(steps);
  const int64_t first = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * kBlock;
  int64_t scalarFrom = 0;
  if (vectorised) {
    const int64_t groups = n / 4;
    for (int64_t g = first; g < groups; g += stride) {
      float x[kIns][4], y[kOuts][4];
      for (int k = 0; k < kIns; ++k)
        load4(in.p[k], 4 * g, x[k]);
      for (int e = 0; e < 4; ++e) {
        float xe[kIns], ye[kOuts];
        for (int k = 0; k < kIns; ++k)
          xe[k] = x[k][e];
        op(xe, ye, 4 * g + e);
        for (int k = 0; k < kOuts; ++k)
          y[k][e] = ye[k];
      }
      for (int k = 0; k < kOuts; ++k)
        store4(out.p[k], 4 * g, y[k]);
    }
    scalarFrom = groups * 4;
  }
  for (int64_t i = scalarFrom + first; i < n; i += stride) {
    float xe[kIns], ye[kOuts];
    for (int k = 0; k < kIns; ++k)
      xe[k] = load(in.p[k], i);
    op(xe, ye, i);
    for (int k = 0; k < kOuts; ++k)
      store(out.p[k], i, ye[k]);
  }
}

// Operations. prepare() runs once per thread before the loop.
struct NoStepValues {
  __device__ void prepare(const StepValues *) {}
};

struct GeluOp : NoStepValues {
  __device__ void operator()(const float *x, float *y, int64_t) const {
    const float v = x[0];
    const float t = tanhViaExp(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    y[0] = 0.5f * v * (1.0f + t);
  }
};

// Inputs dy, x.
struct GeluGradOp : NoStepValues {
  __device__ void operator()(const float *in, float *dx, int64_t) const {
    const float v = in[1];
    const float t = tanhViaExp(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[0] = in[0] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
};

// Inputs gate, up.
struct SwigluOp : NoStepValues {
  __device__ void operator()(const float *in, float *y, int64_t) const {
    const float g = in[0];
    y[0] = g * sigmoid(g) * in[1];
  }
};

// Inputs dy, gate, up; outputs dgate, dup. d silu(g) / dg = s (1 + g (1 -
// s)) with s = sigmoid(g).
struct SwigluGradOp : NoStepValues {
  __device__ void operator()(const float *in, float *out, int64_t) const {
    const float d = in[0], g = in[1], s = sigmoid(g);
    out[0] = d * in[2] * (s * (1.0f + g * (1.0f - s)));
    out[1] = d * (g * s);
  }
};

struct AddOp : NoStepValues {
  __device__ void operator()(const float *in, float *c, int64_t) const {
    c[0] = in[0] + in[1];
  }
};

// y[i] = x[i] * (kept ? scale : 0), kept iff the 24 random bits of draw
// index.at(i) are >= threshold = ceil(p * 2^24) (kernels/cpu/DropoutMask.h).
// The draw index is i, or with `tp_dim` i's index in the whole tensor
// (DrawIndex.h). The key comes from the step values in device memory.
struct DropoutOp {
  uint64_t threshold;
  float scale;
  int64_t rngOffset;
  int64_t microBatch;
  DrawIndex index;
  uint64_t key;
  __device__ void prepare(const StepValues *steps) {
    key = steps ? rng::dropoutKey(steps->seed, rngOffset, steps->step,
                                  microBatch)
                : rng::dropoutKey(0, rngOffset, 1, 0);
  }
  __device__ void operator()(const float *x, float *y, int64_t i) const {
    const float f =
        (rng::draw(key, static_cast<uint64_t>(index.at(i))) >> 40) >=
                threshold
            ? scale
            : 0.0f;
    y[0] = x[0] * f;
  }
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    copyKernel(const T *__restrict__ x, T *__restrict__ y, int64_t n) {
  BRAID_GRID_STRIDE(i, n) { y[i] = x[i]; }
}

// dst[r * dstStride + dstOffset + c] = src[r * srcStride + srcOffset + c]
// for r < numRows, c < k: one part of split or of its gradient.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    copyColumnsKernel(const T *__restrict__ src, int64_t srcStride,
                      int64_t srcOffset, T *__restrict__ dst,
                      int64_t dstStride, int64_t dstOffset, int64_t numRows,
                      int64_t k) {
  BRAID_GRID_STRIDE(i, numRows * k) {
    const int64_t r = i / k, c = i - r * k;
    dst[r * dstStride + dstOffset + c] = src[r * srcStride + srcOffset + c];
  }
}

// --- host side ---------------------------------------------------------------

template <typename T, int N>
bool aligned4(const Pointers<T, N> &ptrs) {
  for (int k = 0; k < N; ++k)
    if (reinterpret_cast<uintptr_t>(ptrs.p[k]) % (4 * sizeof(T)) != 0)
      return false;
  return true;
}

// Runs `op` over the launch's flat elements: inputs are args.ins[0, kIns),
// outputs args.outs[0, kOuts), all of storage type T and the same size.
template <typename T, int kIns, int kOuts, typename Op>
void runMap(const KernelArgs &args, Op op) {
  const int64_t n = args.ins[0].numel();
  if (n == 0)
    return;
  Pointers<const T, kIns> in{};
  Pointers<T, kOuts> out{};
  for (int k = 0; k < kIns; ++k)
    in.p[k] = rows::dataOf<const T>(args.ins[k]);
  for (int k = 0; k < kOuts; ++k)
    out.p[k] = rows::dataOf<T>(args.outs[k]);
  const bool vectorised = aligned4(in) && aligned4(out);
  const int64_t work = vectorised ? n / 4 + n % 4 : n;
  mapKernel<T, Op, kIns, kOuts>
      <<<rows::gridFor(work, kBlock * kPerThread), kBlock, 0,
         rows::streamOf(args)>>>(op, in, out, n, vectorised,
                                 rows::stepValuesOf(args));
}

template <typename T> void runGelu(const KernelArgs &args) {
  runMap<T, 1, 1>(args, GeluOp{});
}
template <typename T> void runGeluGradInput(const KernelArgs &args) {
  runMap<T, 2, 1>(args, GeluGradOp{});
}
template <typename T> void runSwiglu(const KernelArgs &args) {
  runMap<T, 2, 1>(args, SwigluOp{});
}
template <typename T> void runSwigluGradInput(const KernelArgs &args) {
  runMap<T, 3, 2>(args, SwigluGradOp{});
}
template <typename T> void runAdd(const KernelArgs &args) {
  runMap<T, 2, 1>(args, AddOp{});
}

// Forward and backward are the same map: y = x * factor(flat index). With
// p = 0 the storage bits are copied, as on the CPU.
template <typename T> void runDropout(const KernelArgs &args) {
  const int64_t n = args.ins[0].numel();
  if (n == 0)
    return;
  const KernelParams &params = rows::paramsOf(args);
  const double p = params.floatOr("p", 0.0);
  if (!(p > 0)) {
    copyKernel<T><<<elementGrid(n), kBlock, 0, rows::streamOf(args)>>>(
        rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), n);
    return;
  }
  DropoutOp op{};
  op.threshold = static_cast<uint64_t>(std::ceil(p * 16777216.0));
  op.scale = 1.0f / (1.0f - static_cast<float>(p));
  op.rngOffset = params.intOr("rng_offset", 0);
  op.microBatch = args.microBatch;
  op.index = DrawIndex::of(args, *args.ins[0].desc);
  runMap<T, 1, 1>(args, op);
}

// Part p holds columns [p*K, (p+1)*K) of each row: one launch per part.
template <typename T> void runSplit(const KernelArgs &args) {
  const int64_t parts = static_cast<int64_t>(args.outs.size());
  const int64_t k = args.outs[0].desc->lastDim();
  const int64_t numRows = args.outs[0].desc->rows();
  if (k == 0 || numRows == 0)
    return;
  cudaStream_t stream = rows::streamOf(args);
  for (int64_t p = 0; p < parts; ++p)
    copyColumnsKernel<T>
        <<<elementGrid(numRows * k), kBlock, 0, stream>>>(
            rows::dataOf<T>(args.ins[0]), parts * k, p * k,
            rows::dataOf<T>(args.outs[p]), k, 0, numRows, k);
}

template <typename T> void runSplitGradInput(const KernelArgs &args) {
  const int64_t parts = static_cast<int64_t>(args.ins.size());
  const int64_t k = args.ins[0].desc->lastDim();
  const int64_t numRows = args.ins[0].desc->rows();
  if (k == 0 || numRows == 0)
    return;
  cudaStream_t stream = rows::streamOf(args);
  for (int64_t p = 0; p < parts; ++p)
    copyColumnsKernel<T>
        <<<elementGrid(numRows * k), kBlock, 0, stream>>>(
            rows::dataOf<T>(args.ins[p]), k, 0, rows::dataOf<T>(args.outs[0]),
            parts * k, p * k, numRows, k);
}

} // namespace

absl::Status registerElementwiseKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"gelu", byStorage<runGelu<float>, runGelu<Bf16>>},
          {"gelu_grad_input",
           byStorage<runGeluGradInput<float>, runGeluGradInput<Bf16>>},
          {"swiglu", byStorage<runSwiglu<float>, runSwiglu<Bf16>>},
          {"swiglu_grad_input",
           byStorage<runSwigluGradInput<float>, runSwigluGradInput<Bf16>>},
          {"add", byStorage<runAdd<float>, runAdd<Bf16>>},
          {"dropout", byStorage<runDropout<float>, runDropout<Bf16>>},
          {"dropout_grad_input",
           byStorage<runDropout<float>, runDropout<Bf16>>},
          {"split", byStorage<runSplit<float>, runSplit<Bf16>>},
          {"split_grad_input",
           byStorage<runSplitGradInput<float>, runSplitGradInput<Bf16>>},
      });
}

} // namespace braid::cuda
