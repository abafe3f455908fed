// linear, linear_grad_input, linear_grad_weight on cuBLASLt (docs/kernels.md,
// docs/gpu-backend.md): y = x w^T + b, dx = dy w, dw = dy^T x, db = column
// sums of dy. f32 or bf16 operands, f32 compute; the weight gradient may be
// f32 over bf16 inputs, and `accumulate` is beta = 1 into it.
//
// The bias of `linear` is cuBLASLt's CUBLASLT_EPILOGUE_BIAS. The bias
// gradient is a deterministic column reduction of dy (chunks of rows summed
// in order into f32 partials in the workspace, then the partials in chunk
// order) rather than CUBLASLT_EPILOGUE_BGRADB, because that epilogue
// overwrites its output and `accumulate` must add, and because db may have
// another dtype than dw.
//
// Also here: enqueueGemm, shared by every GEMM of the CUDA kernels, and its
// fallback kernel for what cuBLASLt does not take (k = 0, no algorithm).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/Storage.cuh"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/GemmProblem.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

// --- storage ----------------------------------------------------------------

// An operand whose dtype is known at run time only (the fallback GEMM).
__device__ __forceinline__ float loadDyn(const void *p, bool bf16,
                                         int64_t i) {
  return bf16 ? widen(static_cast<const uint16_t *>(p)[i])
              : static_cast<const float *>(p)[i];
}
__device__ __forceinline__ void storeDyn(void *p, bool bf16, int64_t i,
                                         float v) {
  if (bf16)
    static_cast<uint16_t *>(p)[i] = roundToBf16(v);
  else
    static_cast<float *>(p)[i] = v;
}

cudaStream_t streamOf(const GpuContext &gpu) {
  return static_cast<cudaStream_t>(gpu.stream);
}

const GpuContext &gpuOf(const KernelArgs &args) { return *args.ctx->gpu; }

bool accumulateOf(const KernelArgs &args) {
  return args.params != nullptr && args.params->intOr("accumulate", 0) != 0;
}

// The product of all dimensions but the last (not 0 when the last is).
int64_t rowsOf(const TensorDesc &d) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < d.shape.size(); ++i)
    n *= d.shape[i];
  return n;
}

// --- the fallback GEMM ------------------------------------------------------

struct FallbackArgs {
  bool transA, transB;
  int64_t m, n, k;
  int32_t batch;
  int64_t lda, ldb, ldc, strideA, strideB, strideC;
  bool bf16A, bf16C, bf16Bias;
  float alpha, beta;
  const void *a, *b, *bias;
  void *c;
};

// One output element per thread, grid-stride over m * n * batch; the sum
// runs over k in order, in f32. beta = 0 never reads C (it may hold NaN).
__global__ void fallbackGemmKernel(FallbackArgs g) {
  const int64_t total = g.m * g.n * g.batch;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       idx < total; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx % g.m;
    const int64_t j = (idx / g.m) % g.n;
    const int64_t bt = idx / (g.m * g.n);
    const int64_t aBase = bt * g.strideA, bBase = bt * g.strideB;
    float sum = 0.0f;
    for (int64_t l = 0; l < g.k; ++l) {
      const int64_t ai = g.transA ? l + i * g.lda : i + l * g.lda;
      const int64_t bi = g.transB ? j + l * g.ldb : l + j * g.ldb;
      sum += loadDyn(g.a, g.bf16A, aBase + ai) *
             loadDyn(g.b, g.bf16A, bBase + bi);
    }
    const int64_t ci = bt * g.strideC + i + j * g.ldc;
    float v = g.alpha * sum;
    if (g.beta != 0.0f)
      v += g.beta * loadDyn(g.c, g.bf16C, ci);
    if (g.bias != nullptr)
      v += loadDyn(g.bias, g.bf16Bias, i);
    storeDyn(g.c, g.bf16C, ci, v);
  }
}

// --- column sums (bias gradient) --------------------------------------------

// Stage 1: block column `c` of chunk blockIdx.y sums rows
// [chunk * rowsPerChunk, ...) in order. With one chunk it writes the output
// (adding to it with accumulate); otherwise an f32 partial.
template <typename T, typename U>
__global__ void columnSumChunks(const T *__restrict dy, int64_t rows,
                                int64_t cols, int64_t rowsPerChunk,
                                float *__restrict partial, U *__restrict out,
                                bool accumulate) {
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rowsPerChunk;
  const int64_t r1 = min(rows, r0 + rowsPerChunk);
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      acc += load(dy, r * cols + c);
    if (partial != nullptr)
      partial[chunk * cols + c] = acc;
    else
      store(out, c, accumulate ? load(out, c) + acc : acc);
  }
}

// Stage 2: the partials of each column in chunk order.
template <typename U>
__global__ void columnSumPartials(const float *__restrict partial,
                                  int64_t chunks, int64_t cols,
                                  U *__restrict out, bool accumulate) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.0f;
    for (int64_t ch = 0; ch < chunks; ++ch)
      acc += partial[ch * cols + c];
    store(out, c, accumulate ? load(out, c) + acc : acc);
  }
}

// out[c] (+)= sum over rows of dy[r, c]. Deterministic: the split depends on
// the shape and the workspace size only.
template <typename T, typename U>
void columnSums(const GpuContext &gpu, const T *dy, int64_t rows,
                int64_t cols, U *out, bool accumulate) {
  if (cols == 0)
    return;
  const ColumnSplit split =
      planColumnSplit(rows, cols, 1, gpu.workspace ? gpu.workspaceBytes : 0);
  const int64_t colBlocks = blocksFor(cols, kThreads);
  float *partial =
      split.chunks > 1 ? static_cast<float *>(gpu.workspace) : nullptr;
  dim3 grid(static_cast<unsigned>(colBlocks),
            static_cast<unsigned>(split.chunks));
  columnSumChunks<T, U><<<grid, kThreads, 0, streamOf(gpu)>>>(
      dy, rows, cols, split.rowsPerChunk, partial, out, accumulate);
  if (partial != nullptr)
    columnSumPartials<U>
        <<<static_cast<unsigned>(colBlocks), kThreads, 0, streamOf(gpu)>>>(
            partial, split.chunks, cols, out, accumulate);
}

// --- the kernels ------------------------------------------------------------

void runLinear(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1], &y = args.outs[0];
  // A row-parallel linear's partial sum holds its bias on TP rank 0 only.
  const bool partialBias = args.params != nullptr &&
                           args.params->intOr("partial_bias", 0) != 0;
  const bool hasBias = args.ins.size() == 3 &&
                       !(partialBias && args.ctx != nullptr &&
                         args.ctx->tpRank != 0);
  const int64_t n = rowsOf(*x.desc), k = x.desc->lastDim();
  const int64_t m = w.desc->shape[0];
  if (n == 0 || m == 0)
    return;
  GemmProblem p = linearForward(n, m, k, x.desc->dtype, w.desc->dtype,
                                y.desc->dtype);
  GemmOperands ops;
  ops.a = w.data;
  ops.b = x.data;
  ops.c = y.data;
  if (hasBias) {
    p.epilogue = GemmEpilogue::kBias;
    p.biasType = args.ins[2].desc->dtype;
    ops.bias = args.ins[2].data;
  }
  enqueueGemm(gpuOf(args), p, ops);
}

void runLinearGradInput(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &w = args.ins[1], &dx = args.outs[0];
  const int64_t n = rowsOf(*dy.desc), m = dy.desc->lastDim();
  const int64_t k = w.desc->shape[1];
  if (n == 0 || k == 0)
    return;
  const GemmProblem p =
      linearGradInput(n, m, k, dy.desc->dtype, w.desc->dtype, dx.desc->dtype,
                      accumulateOf(args));
  GemmOperands ops;
  ops.a = w.data;
  ops.b = dy.data;
  ops.c = dx.data;
  enqueueGemm(gpuOf(args), p, ops);
}

template <typename T>
void biasGradient(const GpuContext &gpu, const TensorView &dy,
                  const TensorView &db, int64_t n, int64_t m,
                  bool accumulate) {
  const T *src = static_cast<const T *>(dy.data);
  if (db.desc->dtype == DType::kBF16)
    columnSums(gpu, src, n, m, db.bf16(), accumulate);
  else
    columnSums(gpu, src, n, m, db.f32(), accumulate);
}

void runLinearGradWeight(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &x = args.ins[1], &dw = args.outs[0];
  const bool accumulate = accumulateOf(args);
  const int64_t n = rowsOf(*dy.desc), m = dy.desc->lastDim();
  const int64_t k = x.desc->lastDim();
  if (m == 0)
    return;
  const GpuContext &gpu = gpuOf(args);
  // The bias gradient first: its partials use the workspace, which the GEMM
  // after it on the same stream may then reuse.
  if (args.outs.size() == 2) {
    if (dy.desc->dtype == DType::kBF16)
      biasGradient<uint16_t>(gpu, dy, args.outs[1], n, m, accumulate);
    else
      biasGradient<float>(gpu, dy, args.outs[1], n, m, accumulate);
  }
  if (k == 0)
    return;
  const GemmProblem p = linearGradWeight(n, m, k, dy.desc->dtype,
                                         x.desc->dtype, dw.desc->dtype,
                                         accumulate);
  GemmOperands ops;
  ops.a = x.data;
  ops.b = dy.data;
  ops.c = dw.data;
  enqueueGemm(gpu, p, ops);
}

}  // namespace

// --- shared GEMM entry points -----------------------------------------------

void enqueueFallbackGemm(const GpuContext &gpu, const GemmProblem &p,
                         const GemmOperands &ops) {
  const int64_t total = p.m * p.n * p.batch;
  if (total == 0)
    return;
  FallbackArgs g;
  g.transA = p.transA;
  g.transB = p.transB;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.batch = p.batch;
  g.lda = p.a.ld;
  g.ldb = p.b.ld;
  g.ldc = p.c.ld;
  g.strideA = p.a.batchStride;
  g.strideB = p.b.batchStride;
  g.strideC = p.c.batchStride;
  g.bf16A = p.a.type == DType::kBF16;
  g.bf16C = p.c.type == DType::kBF16;
  g.bf16Bias = p.biasType == DType::kBF16;
  g.alpha = p.alpha;
  g.beta = p.beta;
  g.a = ops.a;
  g.b = ops.b;
  g.bias = p.epilogue == GemmEpilogue::kBias ? ops.bias : nullptr;
  g.c = ops.c;
  fallbackGemmKernel<<<static_cast<unsigned>(blocksFor(total, kThreads)),
                       kThreads, 0, streamOf(gpu)>>>(g);
}

void enqueueGemm(const GpuContext &gpu, const GemmProblem &p,
                 const GemmOperands &ops, void *workspace,
                 size_t workspaceBytes) {
  if (p.m == 0 || p.n == 0 || p.batch == 0)
    return;
  if (p.k > 0 &&
      enqueueCublasLt(gpu, p, ops, workspace, workspaceBytes).ok())
    return;
  enqueueFallbackGemm(gpu, p, ops);
}

void enqueueGemm(const GpuContext &gpu, const GemmProblem &p,
                 const GemmOperands &ops) {
  enqueueGemm(gpu, p, ops, gpu.workspace, gpu.workspaceBytes);
}

absl::Status registerLinearKernels(KernelRegistry &registry) {
  return addCudaKernels(registry,
                        {
                            {"linear", runLinear},
                            {"linear_grad_input", runLinearGradInput},
                            {"linear_grad_weight", runLinearGradWeight},
                        });
}

}  // namespace braid::cuda
