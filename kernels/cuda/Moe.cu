// moe_route and moe_route_grad on CUDA (docs/kernels.md, docs/moe.md): the
// router of a mixture-of-experts layer, one thread per token row
// (grid-stride), each running the row arithmetic of
// kernels/common/MoeRoute.h that the CPU kernels run: a row holds a few
// dozen to a few hundred experts and the top-k is a k-pass scan of them,
// so both sides choose the same experts (ties to the lower expert). No
// workspace, nothing allocated: a CUDA graph may capture both.
#include <cstdint>

#include "kernels/common/MoeRoute.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::kBlock;

moe::RouteParams routeParams(const KernelArgs &args) {
  const KernelParams &p = rows::paramsOf(args);
  return {static_cast<int>(p.intOr("sigmoid", 0) != 0),
          static_cast<int>(p.intOr("normalize", 0) != 0),
          static_cast<float>(p.floatOr("scale", 1.0))};
}

__global__ void __launch_bounds__(kBlock)
    moeRouteKernel(const float *__restrict__ logits,
                   const float *__restrict__ bias, int32_t *__restrict__ experts,
                   float *__restrict__ weights, float *__restrict__ scores,
                   int64_t n, int64_t e, int64_t k, moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::routeRow(logits + r * e, bias, e, k, p, scores + r * e,
                  experts + r * k, weights + r * k);
}

__global__ void __launch_bounds__(kBlock)
    moeRouteGradKernel(const float *__restrict__ dweights,
                       const float *__restrict__ scores,
                       const int32_t *__restrict__ experts,
                       float *__restrict__ dlogits, int64_t n, int64_t e,
                       int64_t k, moe::RouteParams p) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < n;
       r += int64_t{gridDim.x} * blockDim.x)
    moe::routeGradRow(dweights + r * k, scores + r * e, experts + r * k, e, k,
                      p, dlogits + r * e);
}

void runMoeRoute(const KernelArgs &args) {
  const int64_t n = args.ins[0].desc->shape[0], e = args.ins[0].desc->shape[1];
  const int64_t k = args.outs[0].desc->shape[1];
  if (n == 0)
    return;
  moeRouteKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                   rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins.size() > 1 ? args.ins[1].f32() : nullptr,
      args.outs[0].i32(), args.outs[1].f32(), args.outs[2].f32(), n, e, k,
      routeParams(args));
}

void runMoeRouteGrad(const KernelArgs &args) {
  const int64_t n = args.ins[1].desc->shape[0], e = args.ins[1].desc->shape[1];
  const int64_t k = args.ins[0].desc->shape[1];
  if (n == 0)
    return;
  moeRouteGradKernel<<<rows::gridFor(n, kBlock), kBlock, 0,
                       rows::streamOf(args)>>>(
      args.ins[0].f32(), args.ins[1].f32(), args.ins[2].i32(),
      args.outs[0].f32(), n, e, k, routeParams(args));
}

} // namespace

absl::Status registerMoeKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {{"moe_route", runMoeRoute},
                                   {"moe_route_grad", runMoeRouteGrad}});
}

} // namespace braid::cuda
