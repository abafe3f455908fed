// moe_route and moe_route_grad: the router of a mixture-of-experts layer
// (docs/moe.md "What the block means", docs/kernels.md), one token row at a
// time with the arithmetic of kernels/common/MoeRoute.h, which the CUDA
// kernels share. f32 in every plan: the choice must not hang on bf16
// rounding. Rows are independent, so the bits do not depend on the number
// of threads.
#include <cstdint>

#include "kernels/common/MoeRoute.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"

namespace braid::cpu {
namespace {

moe::RouteParams routeParams(const KernelArgs &args) {
  const KernelParams &p = paramsOf(args);
  return {static_cast<int>(p.intOr("sigmoid", 0) != 0),
          static_cast<int>(p.intOr("normalize", 0) != 0),
          static_cast<float>(p.floatOr("scale", 1.0))};
}

void runMoeRoute(const KernelArgs &args) {
  const TensorDesc &ld = *args.ins[0].desc;
  const int64_t n = ld.shape[0], e = ld.shape[1];
  const int64_t k = args.outs[0].desc->shape[1];
  const float *logits = args.ins[0].f32();
  const float *bias = args.ins.size() > 1 ? args.ins[1].f32() : nullptr;
  int32_t *experts = args.outs[0].i32();
  float *weights = args.outs[1].f32(), *scores = args.outs[2].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e * k), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::routeRow(logits + r * e, bias, e, k, p, scores + r * e,
                    experts + r * k, weights + r * k);
  });
}

void runMoeRouteGrad(const KernelArgs &args) {
  const TensorDesc &sd = *args.ins[1].desc;
  const int64_t n = sd.shape[0], e = sd.shape[1];
  const int64_t k = args.ins[0].desc->shape[1];
  const float *dweights = args.ins[0].f32(), *scores = args.ins[1].f32();
  const int32_t *experts = args.ins[2].i32();
  float *dlogits = args.outs[0].f32();
  const moe::RouteParams p = routeParams(args);
  parallelFor(poolOf(args), n, rowGrain(e), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      moe::routeGradRow(dweights + r * k, scores + r * e, experts + r * k, e,
                        k, p, dlogits + r * e);
  });
}

} // namespace

absl::Status registerMoeKernels(KernelRegistry &registry) {
  return registerAll(registry, {{"moe_route", runMoeRoute},
                                {"moe_route_grad", runMoeRouteGrad}});
}

} // namespace braid::cpu
