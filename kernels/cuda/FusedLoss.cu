// The LM head fused with cross-entropy, and multi-tensor AdamW on CUDA (docs/fusion.md).
//
// linear_cross_entropy holds one chunk of rows' logits at a time in the
// launch's cuBLASLt workspace (the smaller of the `chunk` parameter and
// what half the workspace holds; when it cannot hold one row the outputs
// are set to NaN, a visible failure rather than a wrong result);
// linear_cross_entropy_with_grad holds R rows in its workspace output
// [R, V] (f32, in the arena), so the compiler chooses R and counts it. Per
// chunk: the logits GEMM (enqueueGemm, f32 output), a row kernel for the
// log-sum-exp and target logit, and with the gradient a kernel for the
// dlogits, then the dx GEMM for the chunk's rows and the dW GEMM over them
// (beta 1 after the first chunk, and for the first with `accumulate`). The
// lse and target logits of all rows sit at the start of the cuBLASLt
// workspace until the loss is summed; the GEMMs get the rest.
//
// cuBLASLt multiplies operands of one type, so with bf16 storage the
// dlogits are rounded to bf16 before the dx and dW GEMMs (the CPU kernels
// keep them f32), written over the f32 logits with the rows' pitch; logits,
// lse and the loss are f32 as on the CPU. The loss is the mean of
// lse - logits[label] summed in double by one block.
//
// The vocabulary-parallel pair: linear_cross_entropy_stats holds its chunks
// in the cuBLASLt workspace as linear_cross_entropy does and writes each
// row's (max, sum of exp, target logit of the TP rank's shard);
// linear_cross_entropy_grad runs the gradient's chunks from the given lse
// (the whole vocabulary's), the labels shifted by the shard's first id.
//
// multi_adamw runs the adamw element update of Optimizer.cu over all its
// tensors in one launch per group of kTensorsPerLaunch tensors (their
// pointers are a kernel argument), with the coefficients computed on the
// device from GpuContext::stepValues, so that a captured CUDA graph stays
// correct at later steps. The first `decayed` tensors use weight_decay, the
// others 0, exactly as their adamw launches would.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/GemmProblem.h"
#include "kernels/cuda/LaunchPlan.h"
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

const GpuContext &gpuOf(const KernelArgs &args) { return *args.ctx->gpu; }

constexpr int64_t kDefaultChunk = int64_t{1} << 20;
constexpr size_t kAlign = 256;

size_t alignUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t rowsOf(const TensorDesc &d) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < d.shape.size(); ++i)
    n *= d.shape[i];
  return n;
}

__device__ __forceinline__ bool validLabel(int32_t label, int64_t v) {
  return label >= 0 && label < v;
}

// Where a launch keeps a chunk of `count` rows of f32 logits, and the
// cuBLASLt workspace its GEMMs get.
struct ChunkSpace {
  int64_t count = 0; // rows per chunk; 0: none fit
  float *logits = nullptr;
  void *gemm = nullptr;
  size_t gemmBytes = 0;
};

// The chunk in the launch's cuBLASLt workspace: `reserved` bytes at its
// start for the launch's own arrays, then the chunk, then what is left for
// cuBLASLt (at least half).
ChunkSpace planChunks(const GpuContext &gpu, size_t reserved, int64_t width,
                      int64_t total, int64_t chunkParam) {
  ChunkSpace s;
  const size_t bytes = gpu.workspace ? gpu.workspaceBytes : 0;
  if (reserved >= bytes || width <= 0)
    return s;
  const size_t perUnit = static_cast<size_t>(width) * sizeof(float);
  const int64_t fits =
      static_cast<int64_t>((bytes - reserved) / 2 / (perUnit + 2 * kAlign));
  const int64_t wanted = std::max<int64_t>(1, chunkParam / width);
  s.count = std::min({fits, wanted, total});
  if (s.count <= 0) {
    s.count = 0;
    return s;
  }
  char *base = static_cast<char *>(gpu.workspace) + reserved;
  s.logits = reinterpret_cast<float *>(base);
  const size_t used =
      alignUp(static_cast<size_t>(s.count * width) * sizeof(float));
  s.gemm = base + used;
  s.gemmBytes = bytes - reserved - used;
  return s;
}

__global__ void fillNan(float *p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    p[i] = __int_as_float(0x7fc00000);
}

template <typename T> __global__ void fillNanT(T *p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store(p, i, __int_as_float(0x7fc00000));
}

template <typename T> void nanOut(cudaStream_t stream, T *p, int64_t n) {
  if (n > 0)
    fillNanT<T><<<rows::gridFor(n, kBlock), kBlock, 0, stream>>>(p, n);
}

// lse and the target logit of each row of a chunk [count, v] of f32 logits
// whose first row is row `row0` of the launch.
__global__ void __launch_bounds__(kBlock)
    chunkLogSumExp(const float *__restrict__ logits, int64_t count, int64_t v,
                   int64_t row0, const int32_t *__restrict__ labels,
                   float *__restrict__ lse, float *__restrict__ target) {
  __shared__ float red[kWarps];
  for (int64_t r = blockIdx.x; r < count; r += gridDim.x) {
    const float *row = logits + r * v;
    const float2 ms = rowMaxAndSum(row, v, red);
    if (threadIdx.x == 0) {
      const int32_t label = labels[row0 + r];
      lse[row0 + r] = ms.x + logf(ms.y);
      target[row0 + r] = validLabel(label, v) ? row[label] : 0.0f;
    }
  }
}

// One block: loss = mean over rows of lse - target, summed in double.
__global__ void __launch_bounds__(kBlock)
    meanLoss(const float *__restrict__ lse, const float *__restrict__ target,
             int64_t numRows, float *__restrict__ loss) {
  __shared__ double red[kWarps];
  double acc = 0.0;
  for (int64_t r = threadIdx.x; r < numRows; r += kBlock)
    acc += static_cast<double>(lse[r]) - static_cast<double>(target[r]);
  const double total = blockSum(acc, red);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(total / static_cast<double>(numRows));
}

// The cross_entropy_stats of each row of a chunk [count, v] of f32 logits
// whose first row is row `row0` of the launch and whose column 0 is
// vocabulary id `first`.
__global__ void __launch_bounds__(kBlock)
    chunkStats(const float *__restrict__ logits, int64_t count, int64_t v,
               int64_t row0, int64_t first,
               const int32_t *__restrict__ labels, float *__restrict__ stats) {
  __shared__ float red[kWarps];
  for (int64_t r = blockIdx.x; r < count; r += gridDim.x) {
    const float *row = logits + r * v;
    const float2 ms = rowMaxAndSum(row, v, red);
    if (threadIdx.x == 0) {
      const int64_t label = labels[row0 + r] - first;
      float *out = stats + 3 * (row0 + r);
      out[0] = ms.x;
      out[1] = ms.y;
      out[2] = label >= 0 && label < v ? row[label] : 0.0f;
    }
  }
}

// f32 dlogits of a chunk [count, v] of f32 logits whose first row is row
// `row0` of the launch and whose column 0 is vocabulary id `first`, in
// place of the logits (each element is read and then written by the same
// thread).
__global__ void __launch_bounds__(kBlock)
    chunkDlogits(float *logits, int64_t count, int64_t v, int64_t row0,
                 int64_t first, const int32_t *__restrict__ labels,
                 const float *__restrict__ lse, float factor) {
  const int64_t n = count * v;
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t r = i / v, j = i - r * v;
    float d = expf(logits[i] - lse[row0 + r]) * factor;
    if (labels[row0 + r] - first == j)
      d -= factor;
    logits[i] = d;
  }
}

struct Head {
  int64_t n, d, v;
  DType dtype;
};

Head headOf(const KernelArgs &args) {
  const TensorDesc &x = *args.ins[0].desc;
  return {rowsOf(x), x.lastDim(), args.ins[1].desc->shape[0], x.dtype};
}

int64_t chunkParamOf(const KernelArgs &args) {
  return std::max<int64_t>(1, rows::paramsOf(args).intOr("chunk", kDefaultChunk));
}

float factorOf(const KernelArgs &args, int64_t n) {
  return static_cast<float>(rows::paramsOf(args).floatOr("scale", 1.0) /
                            static_cast<double>(n));
}

// logits [count, v] (f32, in s.logits) = x rows [row0, row0 + count) times
// W transposed.
template <typename T>
void logitsGemm(const GpuContext &gpu, const KernelArgs &args, const Head &h,
                const ChunkSpace &s, int64_t row0, int64_t count) {
  const GemmProblem p =
      linearForward(count, h.v, h.d, h.dtype, h.dtype, DType::kF32);
  GemmOperands ops;
  ops.a = args.ins[1].data;
  ops.b = static_cast<const T *>(args.ins[0].data) + row0 * h.d;
  ops.c = s.logits;
  enqueueGemm(gpu, p, ops, s.gemm, s.gemmBytes);
}

template <typename T> void runLinearCrossEntropy(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = rows::streamOf(args);
  const Head h = headOf(args);
  float *loss = args.outs[0].f32(), *lse = args.outs[1].f32();
  const size_t reserved = alignUp(static_cast<size_t>(h.n) * sizeof(float));
  const ChunkSpace s =
      planChunks(gpu, reserved, h.v, h.n, chunkParamOf(args));
  if (s.count == 0) {
    fillNan<<<1, 1, 0, stream>>>(loss, 1);
    fillNan<<<rows::gridFor(h.n, kBlock), kBlock, 0, stream>>>(lse, h.n);
    return;
  }
  float *target = static_cast<float *>(gpu.workspace);
  const int32_t *labels = args.ins[2].i32();
  for (int64_t r0 = 0; r0 < h.n; r0 += s.count) {
    const int64_t count = std::min(s.count, h.n - r0);
    logitsGemm<T>(gpu, args, h, s, r0, count);
    chunkLogSumExp<<<rows::gridFor(count, 1), kBlock, 0, stream>>>(
        s.logits, count, h.v, r0, labels, lse, target);
  }
  meanLoss<<<1, kBlock, 0, stream>>>(lse, target, h.n, loss);
}

// bf16 dlogits of a chunk [count, v] of f32 logits whose first row is row
// `row0` of the launch (column 0: vocabulary id `first`), written over the
// logits: row r's v bf16 values take
// the first half of its own f32 row, so the bf16 matrix has 2v elements
// between rows. One block per row, a tile of kBlock values at a time: the
// tile's logits are read, then (after the barrier) its dlogits written.
// Value j lands on the bytes of f32 logit j / 2, which this tile or an
// earlier one has read already, and never on those of a later tile.
__global__ void __launch_bounds__(kBlock)
    chunkDlogitsBf16InPlace(float *logits, int64_t count, int64_t v,
                            int64_t row0, int64_t first,
                            const int32_t *__restrict__ labels,
                            const float *__restrict__ lse, float factor) {
  for (int64_t r = blockIdx.x; r < count; r += gridDim.x) {
    float *row = logits + r * v;
    Bf16 *out = reinterpret_cast<Bf16 *>(row);
    const float shift = lse[row0 + r];
    const int64_t label = labels[row0 + r] - first;
    for (int64_t j0 = 0; j0 < v; j0 += kBlock) {
      const int64_t j = j0 + threadIdx.x;
      float d = 0.0f;
      if (j < v) {
        d = expf(row[j] - shift) * factor;
        if (label == j)
          d -= factor;
      }
      __syncthreads();
      if (j < v)
        store(out, j, d);
    }
    __syncthreads();
  }
}

// dx, dW and the workspace of the kernels with the gradient, outputs
// `out` to `out + 2`, and the NaNs they hold when the launch cannot run.
struct HeadGrads {
  TensorView dx, dw, workspace;
};

HeadGrads headGradsOf(const KernelArgs &args, int out) {
  return {args.outs[out], args.outs[out + 1], args.outs[out + 2]};
}

template <typename T>
void nanGrads(cudaStream_t stream, const Head &h, const HeadGrads &g) {
  nanOut(stream, rows::dataOf<T>(g.dx), h.n * h.d);
  if (g.dw.desc->dtype == DType::kBF16)
    nanOut(stream, g.dw.bf16(), h.v * h.d);
  else
    nanOut(stream, g.dw.f32(), h.v * h.d);
}

// The chunks of the gradient: per chunk of R rows (the workspace's first
// dimension), the logits GEMM, then, when `target` is given, each row's lse
// (into `lse`) and target logit, the dlogits, and the dx and dW GEMMs.
// `gemmSpace` is what the GEMMs get of the cuBLASLt workspace.
template <typename T>
void headBackward(const KernelArgs &args, const Head &h, const HeadGrads &g,
                  float *lse, float *target, int64_t first, void *gemmSpace,
                  size_t gemmBytes) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = rows::streamOf(args);
  T *dx = rows::dataOf<T>(g.dx);
  // The chunk: R rows of f32 logits in the workspace output (the arena).
  float *logits = g.workspace.f32();
  const int64_t chunkRows = g.workspace.desc->shape[0];
  const bool accumulate = rows::paramsOf(args).intOr("accumulate", 0) != 0;
  const ChunkSpace s{chunkRows, logits, gemmSpace, gemmBytes};
  const int32_t *labels = args.ins[2].i32();
  const float factor = factorOf(args, h.n);
  // bf16 dlogits keep the f32 rows' pitch (see chunkDlogitsBf16InPlace).
  const int64_t dlogitsLd = kBf16 ? 2 * h.v : h.v;
  for (int64_t r0 = 0; r0 < h.n; r0 += chunkRows) {
    const int64_t count = std::min(chunkRows, h.n - r0);
    logitsGemm<T>(gpu, args, h, s, r0, count);
    if (target)
      chunkLogSumExp<<<rows::gridFor(count, 1), kBlock, 0, stream>>>(
          logits, count, h.v, r0, labels, lse, target);
    if constexpr (kBf16)
      chunkDlogitsBf16InPlace<<<rows::gridFor(count, 1), kBlock, 0,
                                stream>>>(logits, count, h.v, r0, first,
                                          labels, lse, factor);
    else
      chunkDlogits<<<rows::gridFor(count * h.v, kBlock * 4), kBlock, 0,
                     stream>>>(logits, count, h.v, r0, first, labels, lse,
                               factor);
    if (h.d == 0)
      continue;
    GemmOperands in;
    in.a = args.ins[1].data;
    in.b = logits;
    in.c = dx + r0 * h.d;
    enqueueGemm(gpu,
                linearGradInput(count, h.v, h.d, h.dtype, h.dtype, h.dtype,
                                false, dlogitsLd),
                in, gemmSpace, gemmBytes);
    GemmOperands wt;
    wt.a = static_cast<const T *>(args.ins[0].data) + r0 * h.d;
    wt.b = logits;
    wt.c = g.dw.data;
    enqueueGemm(gpu,
                linearGradWeight(count, h.v, h.d, h.dtype, h.dtype,
                                 g.dw.desc->dtype, accumulate || r0 > 0,
                                 dlogitsLd),
                wt, gemmSpace, gemmBytes);
  }
}

template <typename T>
void runLinearCrossEntropyWithGrad(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = rows::streamOf(args);
  const Head h = headOf(args);
  const HeadGrads g = headGradsOf(args, 1);
  float *loss = args.outs[0].f32();
  // The lse and target logit of every row sit at the start of the launch's
  // cuBLASLt workspace; cuBLASLt gets the rest.
  const size_t perRows = alignUp(static_cast<size_t>(h.n) * sizeof(float));
  const size_t bytes = gpu.workspace ? gpu.workspaceBytes : 0;
  if (2 * perRows >= bytes) {
    fillNan<<<1, 1, 0, stream>>>(loss, 1);
    nanGrads<T>(stream, h, g);
    return;
  }
  float *lse = static_cast<float *>(gpu.workspace);
  float *target = reinterpret_cast<float *>(
      static_cast<char *>(gpu.workspace) + perRows);
  headBackward<T>(args, h, g, lse, target, 0,
                  static_cast<char *>(gpu.workspace) + 2 * perRows,
                  bytes - 2 * perRows);
  meanLoss<<<1, kBlock, 0, stream>>>(lse, target, h.n, loss);
}

template <typename T> void runLinearCrossEntropyStats(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = rows::streamOf(args);
  const Head h = headOf(args);
  float *stats = args.outs[0].f32();
  const ChunkSpace s = planChunks(gpu, 0, h.v, h.n, chunkParamOf(args));
  if (s.count == 0) {
    fillNan<<<rows::gridFor(3 * h.n, kBlock), kBlock, 0, stream>>>(stats,
                                                                  3 * h.n);
    return;
  }
  const int64_t first = args.ctx ? args.ctx->tpRank * h.v : 0;
  for (int64_t r0 = 0; r0 < h.n; r0 += s.count) {
    const int64_t count = std::min(s.count, h.n - r0);
    logitsGemm<T>(gpu, args, h, s, r0, count);
    chunkStats<<<rows::gridFor(count, 1), kBlock, 0, stream>>>(
        s.logits, count, h.v, r0, first, args.ins[2].i32(), stats);
  }
}

template <typename T> void runLinearCrossEntropyGrad(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  const Head h = headOf(args);
  const HeadGrads g = headGradsOf(args, 0);
  if (!gpu.workspace || gpu.workspaceBytes == 0) {
    nanGrads<T>(rows::streamOf(args), h, g);
    return;
  }
  // The lse is an input: the whole cuBLASLt workspace goes to the GEMMs.
  headBackward<T>(args, h, g, args.ins[3].f32(),
                  nullptr, args.ctx ? args.ctx->tpRank * h.v : 0,
                  gpu.workspace, gpu.workspaceBytes);
}

// --- multi_adamw ------------------------------------------------------------

struct AdamwParams {
  double beta1, beta2, eps, weightDecay, gradClip;
};

struct AdamwCoefficients {
  float clip, decay, b1, c1, b2, c2, bc2Sqrt, stepSize, eps;
};

// Optimizer.cu's adamwCoefficients: the CPU's scalars, from the device step
// values and norm.
__device__ AdamwCoefficients adamwCoefficients(const AdamwParams &p,
                                               double weightDecay,
                                               const StepValues &sv,
                                               float normValue) {
  const double t = static_cast<double>(sv.update > 1 ? sv.update : 1);
  const double norm = normValue;
  AdamwCoefficients k;
  k.clip = static_cast<float>(
      p.gradClip > 0 ? fmin(1.0, p.gradClip / (norm + 1e-6)) : 1.0);
  k.decay = static_cast<float>(1.0 - sv.lr * weightDecay);
  k.b1 = static_cast<float>(p.beta1);
  k.c1 = static_cast<float>(1 - p.beta1);
  k.b2 = static_cast<float>(p.beta2);
  k.c2 = static_cast<float>(1 - p.beta2);
  k.bc2Sqrt = static_cast<float>(sqrt(1 - pow(p.beta2, t)));
  k.stepSize = static_cast<float>(sv.lr / (1 - pow(p.beta1, t)));
  k.eps = static_cast<float>(p.eps);
  return k;
}

// Tensors per launch: their table is a kernel argument (kernel arguments
// may take 4 KiB on every device; this one takes about 3.1 KiB).
constexpr int kTensorsPerLaunch = 64;
constexpr int64_t kChunkElements = 16384;

struct AdamwTensors {
  int count;
  int decayed;  // of this launch's tensors, the first `decayed`
  const float *grad[kTensorsPerLaunch];
  float *param[kTensorsPerLaunch];
  float *m[kTensorsPerLaunch];
  float *v[kTensorsPerLaunch];
  int64_t numel[kTensorsPerLaunch];
  int64_t chunkStart[kTensorsPerLaunch + 1];
};

// One block per chunk of kChunkElements of one tensor (grid-stride over the
// chunks); the element update is adamwKernel's, operation for operation.
__global__ void multiAdamwKernel(AdamwParams p, AdamwTensors t,
                                 const StepValues *__restrict sv,
                                 const float *__restrict normPtr,
                                 const float *__restrict skip) {
  // Every thread reads the same flag, so the whole grid returns together.
  if (*skip != 0)
    return;
  __shared__ AdamwCoefficients shared[2];
  if (threadIdx.x == 0) {
    shared[0] = adamwCoefficients(p, p.weightDecay, *sv, *normPtr);
    shared[1] = adamwCoefficients(p, 0.0, *sv, *normPtr);
  }
  __syncthreads();
  const int64_t chunks = t.chunkStart[t.count];
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    int ti = 0;
    while (t.chunkStart[ti + 1] <= chunk)
      ++ti;
    const AdamwCoefficients k = shared[ti < t.decayed ? 0 : 1];
    const int64_t begin = (chunk - t.chunkStart[ti]) * kChunkElements;
    const int64_t end = min(t.numel[ti], begin + kChunkElements);
    const float *grad = t.grad[ti];
    float *param = t.param[ti], *m = t.m[ti], *v = t.v[ti];
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float g = __fmul_rn(grad[i], k.clip);
      const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.c1, g));
      const float vi =
          __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(k.c2, __fmul_rn(g, g)));
      const float denom =
          __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2Sqrt), k.eps);
      m[i] = mi;
      v[i] = vi;
      param[i] = __fsub_rn(__fmul_rn(param[i], k.decay),
                           __fmul_rn(k.stepSize, __fdiv_rn(mi, denom)));
    }
  }
}

void runMultiAdamw(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  const KernelParams &params = rows::paramsOf(args);
  const int64_t n = static_cast<int64_t>(args.ins.size()) - 2;
  const int64_t decayed = params.intOr("decayed", 0);
  AdamwParams p;
  p.beta1 = params.floatOr("beta1", 0.9);
  p.beta2 = params.floatOr("beta2", 0.999);
  p.eps = params.floatOr("eps", 1e-8);
  p.weightDecay = params.floatOr("weight_decay", 0);
  p.gradClip = params.floatOr("grad_clip", 0);
  for (int64_t i0 = 0; i0 < n; i0 += kTensorsPerLaunch) {
    AdamwTensors t;
    t.count = static_cast<int>(std::min<int64_t>(kTensorsPerLaunch, n - i0));
    t.decayed = static_cast<int>(
        std::clamp<int64_t>(decayed - i0, 0, t.count));
    t.chunkStart[0] = 0;
    for (int k = 0; k < t.count; ++k) {
      const int64_t i = i0 + k;
      t.grad[k] = args.ins[i].f32();
      t.param[k] = args.outs[i].f32();
      t.m[k] = args.outs[n + i].f32();
      t.v[k] = args.outs[2 * n + i].f32();
      t.numel[k] = args.ins[i].numel();
      t.chunkStart[k + 1] =
          t.chunkStart[k] + (t.numel[k] + kChunkElements - 1) / kChunkElements;
    }
    const int64_t chunks = t.chunkStart[t.count];
    if (chunks == 0)
      continue;
    multiAdamwKernel<<<static_cast<unsigned>(blocksFor(chunks, 1)), kThreads,
                       0, rows::streamOf(args)>>>(p, t, gpu.stepValues,
                                                  args.ins[n].f32(),
                                                  args.ins[n + 1].f32());
  }
}

}  // namespace

absl::Status registerFusedLossKernels(KernelRegistry &registry) {
  return addCudaKernels(
      registry,
      {
          {"linear_cross_entropy", byStorage<runLinearCrossEntropy<float>,
                                             runLinearCrossEntropy<Bf16>>},
          {"linear_cross_entropy_with_grad",
           byStorage<runLinearCrossEntropyWithGrad<float>,
                     runLinearCrossEntropyWithGrad<Bf16>>},
          {"linear_cross_entropy_stats",
           byStorage<runLinearCrossEntropyStats<float>,
                     runLinearCrossEntropyStats<Bf16>>},
          {"linear_cross_entropy_grad",
           byStorage<runLinearCrossEntropyGrad<float>,
                     runLinearCrossEntropyGrad<Bf16>>},
          {"multi_adamw", runMultiAdamw},
      });
}

}  // namespace braid::cuda
