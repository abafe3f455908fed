// cast, fill and accumulate (docs/kernels.md): element-wise, f32 or bf16.
//
// cast rounds f32 to bf16 to nearest even (NaN stays a quiet NaN with its
// sign and upper payload, as on the CPU), widens bf16 exactly, and copies
// when both dtypes agree. accumulate adds exactly (y += x in f32, rounded
// once when y is bf16). fill rounds its value to the storage type once.
// Every element is independent: results equal the CPU's bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/Storage.cuh"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

cudaStream_t streamOf(const KernelArgs &args) {
  return static_cast<cudaStream_t>(args.ctx->gpu->stream);
}

unsigned gridFor(int64_t n) {
  return static_cast<unsigned>(blocksFor(n, kThreads));
}

#define GRID_STRIDE(i, n)                                                     \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n);  \
       i += int64_t{gridDim.x} * blockDim.x)

__global__ void widenKernel(const uint16_t *__restrict x,
                            float *__restrict y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = widen(x[i]); }
}

__global__ void roundKernel(const float *__restrict x,
                            uint16_t *__restrict y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = roundToBf16(x[i]); }
}

template <typename T>
__global__ void accumulateKernel(const T *__restrict x, T *__restrict y,
                                 int64_t n) {
  GRID_STRIDE(i, n) { store(y, i, __fadd_rn(load(y, i), load(x, i))); }
}

template <typename T>
__global__ void fillKernel(T *__restrict y, T value, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = value; }
}

void runCast(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const int64_t n = x.numel();
  if (n == 0)
    return;
  const DType from = x.desc->dtype, to = y.desc->dtype;
  if (from == to) {
    cudaMemcpyAsync(y.data, x.data, static_cast<size_t>(n * dtypeSize(from)),
                    cudaMemcpyDeviceToDevice, streamOf(args));
  } else if (from == DType::kBF16) {
    widenKernel<<<gridFor(n), kThreads, 0, streamOf(args)>>>(x.bf16(),
                                                             y.f32(), n);
  } else {
    roundKernel<<<gridFor(n), kThreads, 0, streamOf(args)>>>(x.f32(),
                                                             y.bf16(), n);
  }
}

void runAccumulate(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const int64_t n = x.numel();
  if (n == 0)
    return;
  if (x.desc->dtype == DType::kBF16)
    accumulateKernel<<<gridFor(n), kThreads, 0, streamOf(args)>>>(
        x.bf16(), y.bf16(), n);
  else
    accumulateKernel<<<gridFor(n), kThreads, 0, streamOf(args)>>>(
        x.f32(), y.f32(), n);
}

void runFill(const KernelArgs &args) {
  const TensorView &y = args.outs[0];
  const int64_t n = y.numel();
  if (n == 0)
    return;
  const float value = static_cast<float>(
      args.params != nullptr ? args.params->floatOr("value", 0) : 0.0);
  if (y.desc->dtype == DType::kBF16)
    fillKernel<uint16_t><<<gridFor(n), kThreads, 0, streamOf(args)>>>(
        y.bf16(), roundToBf16(value), n);
  else
    fillKernel<float><<<gridFor(n), kThreads, 0, streamOf(args)>>>(y.f32(),
                                                                   value, n);
}

// Any element type, byte for byte, on the launch's stream. Either side may
// be a host tensor in the pinned host arena (activation offload: device to
// host and back), so the direction is the one unified addressing gives the
// two pointers; a copy to or from pinned memory stays asynchronous.
void runCopy(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const size_t bytes =
      static_cast<size_t>(x.numel() * dtypeSize(x.desc->dtype));
  if (bytes != 0)
    cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDefault, streamOf(args));
}

}  // namespace

absl::Status registerCastKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {
                                      {"cast", runCast},
                                      {"fill", runFill},
                                      {"accumulate", runAccumulate},
                                      {"copy", runCopy},
                                  });
}

}  // namespace braid::cuda
