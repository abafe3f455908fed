// grad_norm and adamw (docs/kernels.md), f32 only.
//
// grad_norm follows the CPU kernel's order exactly: each input is cut into
// blocks of 4096 elements (planNormChunks; larger only when the workspace
// cannot hold one double per block), each block summed in double over 8
// lanes (lane l takes the elements i with i % 8 == l, in order) and the
// lanes added as the CPU's tree does; then one thread adds the block sums
// in order, inputs in order. No contraction into fused multiply-adds, as
// on the CPU, so with 4096-element blocks the norm equals the CPU's bit for
// bit. The block sums live in the workspace.
//
// adamw reads the step and the learning rate from GpuContext::stepValues
// (device memory), never from the launch, so a captured CUDA graph stays
// correct when replayed at later steps. Its scalars are computed in double
// from them on the device, as the CPU computes them on the host, and the
// element update runs in f32 with the CPU's operations in the CPU's order
// (no contraction).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

const GpuContext &gpuOf(const KernelArgs &args) { return *args.ctx->gpu; }

cudaStream_t streamOf(const GpuContext &gpu) {
  return static_cast<cudaStream_t>(gpu.stream);
}

// --- grad_norm --------------------------------------------------------------

constexpr int kLanes = 8;
// Inputs per launch of the block kernel: their table is a kernel argument
// (3 KiB here; kernel arguments may take 4 KiB on every device).
constexpr int kInputsPerLaunch = 128;

struct NormInputs {
  int count;
  int64_t chunkElements;
  int64_t firstChunk;  // of this launch, in the global chunk list
  int64_t chunks;      // of this launch
  const float *data[kInputsPerLaunch];
  int64_t numel[kInputsPerLaunch];
  int64_t chunkStart[kInputsPerLaunch];  // first chunk of each, local
};

// Groups of 8 threads, one chunk per group (grid-stride over chunks).
__global__ void normChunks(NormInputs in, double *__restrict partial) {
  const int lane = threadIdx.x % kLanes;
  const int64_t group =
      (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kLanes;
  const int64_t groups = int64_t{gridDim.x} * blockDim.x / kLanes;
  for (int64_t chunk = group; chunk < in.chunks; chunk += groups) {
    // The input holding this chunk: the last one starting at or before it.
    int lo = 0;
    for (int i = 1; i < in.count; ++i)
      if (in.chunkStart[i] <= chunk)
        lo = i;
    const int64_t begin = (chunk - in.chunkStart[lo]) * in.chunkElements;
    const int64_t n = min(in.chunkElements, in.numel[lo] - begin);
    const float *x = in.data[lo] + begin;
    double acc = 0.0;
    for (int64_t i = lane; i < n; i += kLanes) {
      const double v = x[i];
      acc = __dadd_rn(acc, __dmul_rn(v, v));
    }
    // The CPU's tree: lanes l and l + w for w = 4, 2, 1. Only this group's
    // 8 lanes take part: other groups of the warp may have left the loop.
    const unsigned groupMask = 0xffu << (threadIdx.x % 32 / kLanes * kLanes);
    for (int w = kLanes / 2; w > 0; w /= 2) {
      const double other = __shfl_down_sync(groupMask, acc, w, kLanes);
      if (lane < w)
        acc = __dadd_rn(acc, other);
    }
    if (lane == 0)
      partial[in.firstChunk + chunk] = acc;
  }
}

// The block sums in order, by one thread; the block stages them through
// shared memory so that the loads overlap.
__global__ void normTotal(const double *__restrict partial, int64_t chunks,
                          float *__restrict norm) {
  __shared__ double staged[kThreads];
  double total = 0.0;
  for (int64_t base = 0; base < chunks; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    staged[threadIdx.x] = i < chunks ? partial[i] : 0.0;
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t count = min(int64_t{kThreads}, chunks - base);
      for (int64_t j = 0; j < count; ++j)
        total = __dadd_rn(total, staged[j]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    norm[0] = static_cast<float>(sqrt(total));
}

__global__ void writeNan(float *norm) { norm[0] = __int_as_float(0x7fc00000); }

void runGradNorm(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = streamOf(gpu);
  float *norm = args.outs[0].f32();
  const int64_t count = static_cast<int64_t>(args.ins.size());
  std::vector<int64_t> numels(count);
  for (int64_t i = 0; i < count; ++i)
    numels[i] = args.ins[i].numel();
  const NormChunks plan = planNormChunks(
      numels.data(), count, gpu.workspace ? gpu.workspaceBytes : 0);
  if (plan.chunks < 0) {
    // Not even one double per input fits: a visible failure, not a wrong
    // clipping coefficient.
    writeNan<<<1, 1, 0, stream>>>(norm);
    return;
  }
  double *partial = static_cast<double *>(gpu.workspace);
  int64_t firstChunk = 0;
  for (int64_t i0 = 0; i0 < count; i0 += kInputsPerLaunch) {
    NormInputs in;
    in.count = 0;
    in.chunkElements = plan.chunkElements;
    in.firstChunk = firstChunk;
    int64_t chunks = 0;
    for (int64_t i = i0; i < std::min(count, i0 + kInputsPerLaunch); ++i) {
      const int k = in.count++;
      in.data[k] = args.ins[i].f32();
      in.numel[k] = numels[i];
      in.chunkStart[k] = chunks;
      chunks += (numels[i] + plan.chunkElements - 1) / plan.chunkElements;
    }
    in.chunks = chunks;
    if (chunks > 0)
      normChunks<<<static_cast<unsigned>(
                       blocksFor(chunks * kLanes, kThreads)),
                   kThreads, 0, stream>>>(in, partial);
    firstChunk += chunks;
  }
  normTotal<<<1, kThreads, 0, stream>>>(partial, firstChunk, norm);
}

// --- adamw ------------------------------------------------------------------

struct AdamwParams {
  double beta1, beta2, eps, weightDecay, gradClip;
};

struct AdamwCoefficients {
  float clip, decay, b1, c1, b2, c2, bc2Sqrt, stepSize, eps;
};

// The CPU's runAdamw scalars, from the device step values and norm.
__device__ AdamwCoefficients adamwCoefficients(const AdamwParams &p,
                                               const StepValues &sv,
                                               float normValue) {
  const double t = static_cast<double>(sv.update > 1 ? sv.update : 1);
  const double norm = normValue;
  AdamwCoefficients k;
  k.clip = static_cast<float>(
      p.gradClip > 0 ? fmin(1.0, p.gradClip / (norm + 1e-6)) : 1.0);
  k.decay = static_cast<float>(1.0 - sv.lr * p.weightDecay);
  k.b1 = static_cast<float>(p.beta1);
  k.c1 = static_cast<float>(1 - p.beta1);
  k.b2 = static_cast<float>(p.beta2);
  k.c2 = static_cast<float>(1 - p.beta2);
  k.bc2Sqrt = static_cast<float>(sqrt(1 - pow(p.beta2, t)));
  k.stepSize = static_cast<float>(sv.lr / (1 - pow(p.beta1, t)));
  k.eps = static_cast<float>(p.eps);
  return k;
}

// The CPU's runStepGuard: 1 when the loss sum or the norm is not finite.
__global__ void stepGuardKernel(const float *__restrict lossSum,
                                const float *__restrict norm,
                                float *__restrict skip) {
  *skip = isfinite(*lossSum) && isfinite(*norm) ? 0.0f : 1.0f;
}

void runStepGuard(const KernelArgs &args) {
  stepGuardKernel<<<1, 1, 0, streamOf(gpuOf(args))>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.outs[0].f32());
}

__global__ void adamwKernel(AdamwParams p, const StepValues *__restrict sv,
                            const float *__restrict normPtr,
                            const float *__restrict skip,
                            const float *__restrict grad,
                            float *__restrict param, float *__restrict m,
                            float *__restrict v, int64_t n) {
  // Every thread reads the same flag, so the whole grid returns together.
  if (*skip != 0)
    return;
  __shared__ AdamwCoefficients shared;
  if (threadIdx.x == 0)
    shared = adamwCoefficients(p, *sv, *normPtr);
  __syncthreads();
  const AdamwCoefficients k = shared;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = __fmul_rn(grad[i], k.clip);
    const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.c1, g));
    const float vi =
        __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(k.c2, __fmul_rn(g, g)));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2Sqrt), k.eps);
    m[i] = mi;
    v[i] = vi;
    param[i] = __fsub_rn(__fmul_rn(param[i], k.decay),
                         __fmul_rn(k.stepSize, __fdiv_rn(mi, denom)));
  }
}

void runAdamw(const KernelArgs &args) {
  const GpuContext &gpu = gpuOf(args);
  const int64_t n = args.ins[0].numel();
  if (n == 0)
    return;
  const KernelParams *params = args.params;
  auto get = [&](const char *name, double fallback) {
    return params != nullptr ? params->floatOr(name, fallback) : fallback;
  };
  AdamwParams p;
  p.beta1 = get("beta1", 0.9);
  p.beta2 = get("beta2", 0.999);
  p.eps = get("eps", 1e-8);
  p.weightDecay = get("weight_decay", 0);
  p.gradClip = get("grad_clip", 0);
  adamwKernel<<<static_cast<unsigned>(blocksFor(n, kThreads)), kThreads, 0,
                streamOf(gpu)>>>(p, gpu.stepValues, args.ins[1].f32(),
                                 args.ins[2].f32(), args.ins[0].f32(),
                                 args.outs[0].f32(),
                                 args.outs[1].f32(), args.outs[2].f32(), n);
}

}  // namespace

absl::Status registerOptimizerKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {
                                      {"grad_norm", runGradNorm},
                                      {"step_guard", runStepGuard},
                                      {"adamw", runAdamw},
                                  });
}

}  // namespace braid::cuda
