// grad_norm, step_guard and adamw: global-norm gradient clipping, the
// non-finite guard and PyTorch's AdamW, with the semantics of
// docs/kernels.md. All read and write f32 only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/SharedLoops.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// --- grad_norm ----------------------------------------------------------

// Inputs are cut into blocks of kNormBlock elements (the last block of each
// input may be shorter). Each block's sum of squares is accumulated in
// double over kNormLanes fixed lanes; block sums are then added in order,
// inputs in order. Nothing depends on the thread count.
constexpr int64_t kNormBlock = 4096;
constexpr int kNormLanes = 8;

BRAID_VECTOR_CLONES
double blockSumOfSquares(const float *__restrict x, int64_t n) {
  double acc[kNormLanes] = {};
  int64_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes)
    for (int l = 0; l < kNormLanes; ++l) {
      const double v = x[i + l];
      acc[l] += v * v;
    }
  for (int l = 0; i < n; ++i, ++l) {
    const double v = x[i];
    acc[l] += v * v;
  }
  for (int w = kNormLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}

void runGradNorm(const KernelArgs &args) {
  const int64_t inputs = static_cast<int64_t>(args.ins.size());
  // firstBlock[i]: index of input i's first block in the global block list.
  std::vector<int64_t> firstBlock(inputs + 1, 0);
  for (int64_t i = 0; i < inputs; ++i)
    firstBlock[i + 1] =
        firstBlock[i] + (args.ins[i].numel() + kNormBlock - 1) / kNormBlock;
  const int64_t blocks = firstBlock[inputs];
  std::vector<double> partial(blocks);

  parallelFor(poolOf(args), blocks, 4, [&](int64_t b0, int64_t b1) {
    int64_t in = std::upper_bound(firstBlock.begin(), firstBlock.end(), b0) -
                 firstBlock.begin() - 1;
    for (int64_t b = b0; b < b1; ++b) {
      while (b >= firstBlock[in + 1])
        ++in;
      const int64_t begin = (b - firstBlock[in]) * kNormBlock;
      const int64_t n = std::min(kNormBlock, args.ins[in].numel() - begin);
      partial[b] = blockSumOfSquares(args.ins[in].f32() + begin, n);
    }
  });

  double total = 0;
  for (double p : partial)
    total += p;
  args.outs[0].f32()[0] = static_cast<float>(std::sqrt(total));
}

// --- step_guard ---------------------------------------------------------

// skip = 1 when the step's summed loss or its gradient norm is not finite,
// else 0: AdamW then leaves the parameters and moments as they are.
void runStepGuard(const KernelArgs &args) {
  const float lossSum = args.ins[0].f32()[0];
  const float norm = args.ins[1].f32()[0];
  args.outs[0].f32()[0] =
      std::isfinite(lossSum) && std::isfinite(norm) ? 0.0f : 1.0f;
}

// --- adamw --------------------------------------------------------------

// One contiguous range. Coefficients arrive by value and the arrays as
// restrict pointers so that the loop vectorises; the arithmetic is the
// formula of docs/kernels.md, operation for operation.
BRAID_VECTOR_CLONES
void adamwRange(AdamwCoefficients k, const float *__restrict grad,
                float *__restrict param, float *__restrict m,
                float *__restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * k.clip;
    const float mi = k.b1 * m[i] + k.c1 * g;
    const float vi = k.b2 * v[i] + k.c2 * (g * g);
    const float denom = std::sqrt(vi) / k.bc2Sqrt + k.eps;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * k.decay - k.stepSize * (mi / denom);
  }
}

void runAdamw(const KernelArgs &args) {
  const KernelParams &params = paramsOf(args);
  const KernelContext &ctx = contextOf(args);
  const double beta1 = params.floatOr("beta1", 0.9);
  const double beta2 = params.floatOr("beta2", 0.999);
  const double gradClip = params.floatOr("grad_clip", 0);
  if (args.ins[2].f32()[0] != 0)
    return; // a non-finite step (step_guard): nothing changes
  const double t = static_cast<double>(std::max<int64_t>(1, ctx.update));
  const double norm = args.ins[1].f32()[0];

  const float clip = static_cast<float>(
      gradClip > 0 ? std::min(1.0, gradClip / (norm + 1e-6)) : 1.0);
  const float decay =
      static_cast<float>(1.0 - ctx.lr * params.floatOr("weight_decay", 0));
  const float b1 = static_cast<float>(beta1),
              c1 = static_cast<float>(1 - beta1);
  const float b2 = static_cast<float>(beta2),
              c2 = static_cast<float>(1 - beta2);
  const float bc2Sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
  const float stepSize = static_cast<float>(ctx.lr / (1 - std::pow(beta1, t)));
  const float eps = static_cast<float>(params.floatOr("eps", 1e-8));

  AdamwCoefficients k{clip,  decay, b1, c1, b2, c2, bc2Sqrt, stepSize,
                      eps};
  const float *grad = args.ins[0].f32();
  float *param = args.outs[0].f32(), *m = args.outs[1].f32(),
        *v = args.outs[2].f32();
  parallelFor(poolOf(args), args.ins[0].numel(), 16384,
              [&](int64_t i0, int64_t i1) {
                adamwRange(k, grad + i0, param + i0, m + i0, v + i0, i1 - i0);
              });
}

} // namespace

void adamwUpdate(AdamwCoefficients k, const float *grad, float *param, float *m,
                 float *v, int64_t n) {
  adamwRange(k, grad, param, m, v, n);
}

absl::Status registerOptimizerKernels(KernelRegistry &registry) {
  return registerAll(
      registry, {
                    {"grad_norm", runGradNorm},
                    {"step_guard", runStepGuard},
                    {"adamw", runAdamw},
                });
}

} // namespace braid::cpu
