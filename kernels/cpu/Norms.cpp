// layer_norm and rms_norm with their input and weight gradients.
//
// Forward kernels save per-row statistics (mean, rstd); backward kernels use
// them instead of recomputing. Rows are independent, so the forward and
// input-gradient kernels split rows over the pool; the weight gradients sum
// over rows, so there each chunk owns a range of columns and adds rows in
// order, which keeps the bits independent of the thread count.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

absl::Status checkEps(const LaunchChecker &c) {
  absl::StatusOr<double> eps = c.floatParam("eps");
  if (!eps.ok())
    return eps.status();
  if (*eps <= 0)
    return c.error(absl::StrCat("parameter 'eps' is ", *eps,
                                ", expected a positive number"));
  return absl::OkStatus();
}

// With x [..., D]: gamma-like operands are [D], statistics are x's leading
// dimensions.
absl::Status checkVector(const LaunchChecker &c, const Operand &op,
                         const Operand &x) {
  return c.shape(op, {x.lastDim()}, "([D], x's last dimension)");
}
absl::Status checkStats(const LaunchChecker &c, const Operand &op,
                        const Operand &x) {
  return c.shape(op, leadingDims(*x.desc), "(x's leading dimensions)");
}

absl::Status checkRows(const LaunchChecker &c, const Operand &x) {
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., D]"));
  if (x.lastDim() == 0)
    return c.error(absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                                "; the normalised dimension D must not be "
                                "empty"));
  return absl::OkStatus();
}

absl::Status checkNormForward(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm" : "rms_norm", sig);
  if (layer) {
    BRAID_KERNEL_TRY(c.inputs({"x", "gamma", "beta"}));
    BRAID_KERNEL_TRY(c.outputs({"y", "mean", "rstd"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"x", "gamma"}));
    BRAID_KERNEL_TRY(c.outputs({"y", "rstd"}));
  }
  BRAID_KERNEL_TRY(c.allF32());
  Operand x = c.in(0);
  BRAID_KERNEL_TRY(checkRows(c, x));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkVector(c, c.in(i), x));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), x));
  for (int i = 1; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.out(i), x));
  return checkEps(c);
}

absl::Status checkLayerNorm(const KernelSignature &sig) {
  return checkNormForward(sig, true);
}
absl::Status checkRmsNorm(const KernelSignature &sig) {
  return checkNormForward(sig, false);
}

// Sum of (x - m)^2 in fixed lanes.
BRAID_INLINE float sumSqDiff(const float *__restrict x, float m, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      float t = x[i + l] - m;
      acc[l] += t * t;
    }
  for (int l = 0; i < n; ++i, ++l) {
    float t = x[i] - m;
    acc[l] += t * t;
  }
  return sumLanes(acc);
}

// The row loops of the kernels below sit in cloned functions that take
// restrict pointers and scalars by value, so that they vectorise at the
// widest width the CPU has.

// Rows [r0, r1) of layer_norm.
BRAID_VECTOR_CLONES
void layerNormRows(const float *__restrict x, const float *__restrict gamma,
                   const float *__restrict beta, float eps, int64_t d,
                   int64_t r0, int64_t r1, float *__restrict y,
                   float *__restrict mean, float *__restrict rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    // Two passes over the row (it sits in L1): the mean, then the centred
    // squares, which avoids the cancellation of E[x^2] - E[x]^2.
    const float m = sum(xr, d) / static_cast<float>(d);
    const float var = sumSqDiff(xr, m, d) / static_cast<float>(d);
    const float s = 1.0f / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j)
      yr[j] = (xr[j] - m) * s * gamma[j] + beta[j];
    mean[r] = m;
    rstd[r] = s;
  }
}

void runLayerNorm(const KernelArgs &args) {
  const float *x = args.ins[0].f32(), *gamma = args.ins[1].f32(),
              *beta = args.ins[2].f32();
  float *y = args.outs[0].f32(), *mean = args.outs[1].f32(),
        *rstd = args.outs[2].f32();
  const int64_t d = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const float eps = static_cast<float>(paramsOf(args).floatOr("eps", 1e-5));
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    layerNormRows(x, gamma, beta, eps, d, r0, r1, y, mean, rstd);
  });
}

// Rows [r0, r1) of rms_norm.
BRAID_VECTOR_CLONES
void rmsNormRows(const float *__restrict x, const float *__restrict gamma,
                 float eps, int64_t d, int64_t r0, int64_t r1,
                 float *__restrict y, float *__restrict rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    const float s =
        1.0f / std::sqrt(dot(xr, xr, d) / static_cast<float>(d) + eps);
    for (int64_t j = 0; j < d; ++j)
      yr[j] = xr[j] * s * gamma[j];
    rstd[r] = s;
  }
}

void runRmsNorm(const KernelArgs &args) {
  const float *x = args.ins[0].f32(), *gamma = args.ins[1].f32();
  float *y = args.outs[0].f32(), *rstd = args.outs[1].f32();
  const int64_t d = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const float eps = static_cast<float>(paramsOf(args).floatOr("eps", 1e-5));
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    rmsNormRows(x, gamma, eps, d, r0, r1, y, rstd);
  });
}

absl::Status checkNormGradInput(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm_grad_input" : "rms_norm_grad_input", sig);
  if (layer)
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "gamma", "mean", "rstd"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "gamma", "rstd"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  BRAID_KERNEL_TRY(c.allF32());
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(checkRows(c, x));
  BRAID_KERNEL_TRY(c.sameShape(dy, x));
  BRAID_KERNEL_TRY(checkVector(c, c.in(2), x));
  for (int i = 3; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.in(i), x));
  return c.sameShape(c.out(0), x);
}

absl::Status checkLayerNormGradInput(const KernelSignature &sig) {
  return checkNormGradInput(sig, true);
}
absl::Status checkRmsNormGradInput(const KernelSignature &sig) {
  return checkNormGradInput(sig, false);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma and
// xhat = (x - mean) * rstd; RMSNorm (mean null) is the same with mean 0 and
// no mean(g). Rows [r0, r1).
BRAID_VECTOR_CLONES
void normGradInputRows(const float *__restrict dy, const float *__restrict x,
                       const float *__restrict gamma,
                       const float *__restrict mean,
                       const float *__restrict rstd, int64_t d, int64_t r0,
                       int64_t r1, float *__restrict dx) {
  const float invD = 1.0f / static_cast<float>(d);
  for (int64_t r = r0; r < r1; ++r) {
    const float *dyr = dy + r * d;
    const float *xr = x + r * d;
    float *dxr = dx + r * d;
    const float m = mean ? mean[r] : 0.0f, s = rstd[r];
    // Element j goes to lane j % kLanes, as in VecMath's reductions. Written
    // with Vec16: in this cloned function the vectoriser otherwise picks an
    // outer-loop form that ran 3x slower than the plain SSE loop.
    Vec16 vG = {}, vGX = {};
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes) {
      const Vec16 g = load16(dyr + j) * load16(gamma + j);
      vG += g;
      vGX += g * ((load16(xr + j) - m) * s);
    }
    float accG[kLanes], accGX[kLanes];
    store16(accG, vG);
    store16(accGX, vGX);
    for (int l = 0; j < d; ++j, ++l) {
      float g = dyr[j] * gamma[j];
      accG[l] += g;
      accGX[l] += g * ((xr[j] - m) * s);
    }
    const float meanG = mean ? sumLanes(accG) * invD : 0.0f;
    const float meanGX = sumLanes(accGX) * invD;
    for (j = 0; j < d; ++j) {
      float xhat = (xr[j] - m) * s;
      dxr[j] = s * (dyr[j] * gamma[j] - meanG - xhat * meanGX);
    }
  }
}

template <bool kLayer> void normGradInput(const KernelArgs &args) {
  const float *dy = args.ins[0].f32(), *x = args.ins[1].f32(),
              *gamma = args.ins[2].f32();
  const float *mean = kLayer ? args.ins[3].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 4 : 3].f32();
  float *dx = args.outs[0].f32();
  const int64_t d = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    normGradInputRows(dy, x, gamma, mean, rstd, d, r0, r1, dx);
  });
}

absl::Status checkNormGradWeight(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm_grad_weight" : "rms_norm_grad_weight",
                  sig);
  if (layer) {
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "mean", "rstd"}));
    BRAID_KERNEL_TRY(c.outputs({"dgamma", "dbeta"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "rstd"}));
    BRAID_KERNEL_TRY(c.outputs({"dgamma"}));
  }
  BRAID_KERNEL_TRY(c.allF32());
  BRAID_KERNEL_TRY(c.accumulateParam());
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(checkRows(c, x));
  BRAID_KERNEL_TRY(c.sameShape(dy, x));
  for (int i = 2; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.in(i), x));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(checkVector(c, c.out(i), x));
  return absl::OkStatus();
}

absl::Status checkLayerNormGradWeight(const KernelSignature &sig) {
  return checkNormGradWeight(sig, true);
}
absl::Status checkRmsNormGradWeight(const KernelSignature &sig) {
  return checkNormGradWeight(sig, false);
}

// Columns [c0, c0 + w) of dgamma = sum over rows of dy * xhat and, for
// layer_norm (mean not null), dbeta = sum over rows of dy, into accG and
// accB; rows are added in order.
BRAID_VECTOR_CLONES
void normGradWeightColumns(const float *__restrict dy,
                           const float *__restrict x,
                           const float *__restrict mean,
                           const float *__restrict rstd, int64_t rows,
                           int64_t d, int64_t c0, int64_t w,
                           float *__restrict accG, float *__restrict accB) {
  std::memset(accG, 0, w * sizeof(float));
  std::memset(accB, 0, w * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const float *dyr = dy + r * d + c0;
    const float *xr = x + r * d + c0;
    const float m = mean ? mean[r] : 0.0f, s = rstd[r];
    for (int64_t j = 0; j < w; ++j)
      accG[j] += dyr[j] * ((xr[j] - m) * s);
    if (mean)
      for (int64_t j = 0; j < w; ++j)
        accB[j] += dyr[j];
  }
}

template <bool kLayer> void normGradWeight(const KernelArgs &args) {
  const float *dy = args.ins[0].f32(), *x = args.ins[1].f32();
  const float *mean = kLayer ? args.ins[2].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 3 : 2].f32();
  float *dgamma = args.outs[0].f32();
  float *dbeta = kLayer ? args.outs[1].f32() : nullptr;
  const bool accumulate = accumulateOf(args);
  const int64_t d = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  parallelFor(poolOf(args), d, 64, [&](int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0;
    float *accG = threadScratch(0, w);
    float *accB = threadScratch(1, w);
    normGradWeightColumns(dy, x, mean, rstd, rows, d, c0, w, accG, accB);
    for (int64_t j = 0; j < w; ++j) {
      dgamma[c0 + j] = accumulate ? dgamma[c0 + j] + accG[j] : accG[j];
      if (kLayer)
        dbeta[c0 + j] = accumulate ? dbeta[c0 + j] + accB[j] : accB[j];
    }
  });
}

} // namespace

absl::Status registerNormKernels(KernelRegistry &registry) {
  return registerAll(
      registry, {
                    {"layer_norm", Device::kCPU, checkLayerNorm, runLayerNorm},
                    {"layer_norm_grad_input", Device::kCPU,
                     checkLayerNormGradInput, normGradInput<true>},
                    {"layer_norm_grad_weight", Device::kCPU,
                     checkLayerNormGradWeight, normGradWeight<true>},
                    {"rms_norm", Device::kCPU, checkRmsNorm, runRmsNorm},
                    {"rms_norm_grad_input", Device::kCPU, checkRmsNormGradInput,
                     normGradInput<false>},
                    {"rms_norm_grad_weight", Device::kCPU,
                     checkRmsNormGradWeight, normGradWeight<false>},
                });
}

} // namespace braid::cpu
