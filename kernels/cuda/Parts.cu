// The sequence- and context-parallel layout kernels take_part, stack_parts
// and unstack_parts on CUDA (docs/kernels.md, "Sequence parallel"): the
// copy plan of PartCopy.h, as on the CPU. One thread per copied unit, grid-
// stride; the unit is the widest of 16, 8, 4, 2 or 1 bytes that divides
// every run, stride and offset of the plan and both pointers, so runs of
// bf16 or f32 rows move as 16-byte vectors. Pure copies: the bits are the
// CPU's. take_part reads the TP or CP rank (`axis`) from the kernel context
// (the same on every run of a rank's program, so it may be a launch
// argument in a captured graph).
#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>

#include "kernels/common/PartCopy.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

// The plan `p` in units of U (its lengths, strides and offsets scaled);
// total = chunks * len units.
template <typename U>
__global__ void __launch_bounds__(kThreads)
    copyRuns(const U *__restrict__ x, U *__restrict__ y, PartCopy p,
             int64_t total) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t q = t / p.len, e = t - q * p.len;
    if (p.scatter)
      y[p.source(q) + e] = x[t];
    else
      y[t] = x[p.source(q) + e];
  }
}

template <typename U>
void launch(const PartCopy &c, int64_t size, const void *x, void *y,
            cudaStream_t stream) {
  const int64_t k = static_cast<int64_t>(sizeof(U));
  PartCopy p = c;
  p.len = c.len * size / k;
  p.strideA = c.strideA * size / k;
  p.strideB = c.strideB * size / k;
  p.base = c.base * size / k;
  const int64_t total = c.chunks * p.len;
  copyRuns<U>
      <<<static_cast<unsigned>(blocksFor(total, kThreads)), kThreads, 0,
         stream>>>(static_cast<const U *>(x), static_cast<U *>(y), p, total);
}

void runCopy(const KernelArgs &args, std::string_view name) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const KernelParams *params = args.params;
  const int64_t dim = params ? params->intOr("dim", 0) : 0;
  const bool cpAxis = params && params->intOr("axis", 1) == 2;
  const int64_t rank =
      args.ctx ? (cpAxis ? args.ctx->cpRank : args.ctx->tpRank) : 0;
  const bool balanced = params && params->intOr("balanced", 0) != 0;
  const bool ring = params && params->intOr("ring", 0) != 0;
  const int64_t ringOffset = params ? params->intOr("ring_offset", 0) : 0;
  const PartCopy plan = PartCopy::of(name, *x.desc, *y.desc, dim, rank,
                                     balanced, ring, ringOffset);
  const int64_t size = dtypeSize(y.desc->dtype);
  cudaStream_t stream = static_cast<cudaStream_t>(args.ctx->gpu->stream);
  if (plan.zero) {
    if (y.numel() > 0)
      cudaMemsetAsync(y.data, 0, static_cast<size_t>(y.numel() * size), stream);
    return;
  }
  if (plan.chunks == 0 || plan.len == 0)
    return;
  // Every byte offset the plan forms is a sum of multiples of these.
  const uint64_t offsets = static_cast<uint64_t>(plan.len * size) |
                           static_cast<uint64_t>(plan.strideA * size) |
                           static_cast<uint64_t>(plan.strideB * size) |
                           static_cast<uint64_t>(plan.base * size) |
                           reinterpret_cast<uintptr_t>(x.data) |
                           reinterpret_cast<uintptr_t>(y.data);
  if (offsets % 16 == 0)
    launch<uint4>(plan, size, x.data, y.data, stream);
  else if (offsets % 8 == 0)
    launch<uint2>(plan, size, x.data, y.data, stream);
  else if (offsets % 4 == 0)
    launch<uint32_t>(plan, size, x.data, y.data, stream);
  else if (offsets % 2 == 0)
    launch<uint16_t>(plan, size, x.data, y.data, stream);
  else
    launch<uint8_t>(plan, size, x.data, y.data, stream);
}

void runTakePart(const KernelArgs &args) { runCopy(args, "take_part"); }
void runStackParts(const KernelArgs &args) { runCopy(args, "stack_parts"); }
void runUnstackParts(const KernelArgs &args) { runCopy(args, "unstack_parts"); }

} // namespace

absl::Status registerPartsKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {
                                      {"take_part", runTakePart},
                                      {"stack_parts", runStackParts},
                                      {"unstack_parts", runUnstackParts},
                                  });
}

} // namespace braid::cuda
