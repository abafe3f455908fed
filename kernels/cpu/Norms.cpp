// layer_norm and rms_norm with their input and weight gradients.
//
// Forward kernels save per-row statistics (mean, rstd); backward kernels use
// them instead of recomputing. Rows are independent, so the forward and
// input-gradient kernels split rows over the pool; the weight gradients sum
// over rows, so there each chunk owns a range of columns and adds rows in
// order, which keeps the bits independent of the thread count.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/SharedLoops.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

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

template <typename T> void runLayerNorm(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]), *gamma = dataOf<T>(args.ins[1]),
          *beta = dataOf<T>(args.ins[2]);
  T *y = dataOf<T>(args.outs[0]);
  float *mean = args.outs[1].f32(), *rstd = args.outs[2].f32();
  const int64_t d = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const float eps = static_cast<float>(paramsOf(args).floatOr("eps", 1e-5));
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      layerNormRows(x, gamma, beta, eps, d, r0, r1, y, mean, rstd);
    } else {
      // bf16: each row widened, normalised by the f32 loop, rounded once.
      const float *g = asF32(gamma, d, threadScratch(0, d));
      const float *bt = asF32(beta, d, threadScratch(1, d));
      float *xs = threadScratch(2, d), *ys = threadScratch(3, d);
      for (int64_t r = r0; r < r1; ++r) {
        convert(x + r * d, xs, d);
        layerNormRows(xs, g, bt, eps, d, 0, 1, ys, mean + r, rstd + r);
        convert(ys, y + r * d, d);
      }
    }
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

template <typename T> void runRmsNorm(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]), *gamma = dataOf<T>(args.ins[1]);
  T *y = dataOf<T>(args.outs[0]);
  float *rstd = args.outs[1].f32();
  const int64_t d = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const float eps = static_cast<float>(paramsOf(args).floatOr("eps", 1e-5));
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      rmsNormRows(x, gamma, eps, d, r0, r1, y, rstd);
    } else {
      const float *g = asF32(gamma, d, threadScratch(0, d));
      float *xs = threadScratch(1, d), *ys = threadScratch(2, d);
      for (int64_t r = r0; r < r1; ++r) {
        convert(x + r * d, xs, d);
        rmsNormRows(xs, g, eps, d, 0, 1, ys, rstd + r);
        convert(ys, y + r * d, d);
      }
    }
  });
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
    float meanG, meanGX;
    normGradMeans(dyr, xr, gamma, m, s, mean != nullptr, d, invD, &meanG,
                  &meanGX);
    for (int64_t j = 0; j < d; ++j) {
      float xhat = (xr[j] - m) * s;
      dxr[j] = s * (dyr[j] * gamma[j] - meanG - xhat * meanGX);
    }
  }
}

template <bool kLayer, typename T>
void normGradInput(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *x = dataOf<T>(args.ins[1]),
          *gamma = dataOf<T>(args.ins[2]);
  const float *mean = kLayer ? args.ins[3].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 4 : 3].f32();
  T *dx = dataOf<T>(args.outs[0]);
  const int64_t d = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      normGradInputRows(dy, x, gamma, mean, rstd, d, r0, r1, dx);
    } else {
      const float *g = asF32(gamma, d, threadScratch(0, d));
      float *dys = threadScratch(1, d), *xs = threadScratch(2, d),
            *dxs = threadScratch(3, d);
      for (int64_t r = r0; r < r1; ++r) {
        convert(dy + r * d, dys, d);
        convert(x + r * d, xs, d);
        normGradInputRows(dys, xs, g, mean ? mean + r : nullptr, rstd + r, d,
                          0, 1, dxs);
        convert(dxs, dx + r * d, d);
      }
    }
  });
}

// Columns [c0, c0 + w) of dgamma = sum over rows of dy * xhat and, for
// layer_norm (mean not null), dbeta = sum over rows of dy, into accG and
// accB; rows are added in order.
template <typename T>
BRAID_INLINE void normGradWeightBody(const T *__restrict dy,
                                     const T *__restrict x,
                                     const float *__restrict mean,
                                     const float *__restrict rstd,
                                     int64_t rows, int64_t d, int64_t c0,
                                     int64_t w, float *__restrict accG,
                                     float *__restrict accB) {
  std::memset(accG, 0, w * sizeof(float));
  std::memset(accB, 0, w * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const T *dyr = dy + r * d + c0;
    const T *xr = x + r * d + c0;
    const float m = mean ? mean[r] : 0.0f, s = rstd[r];
    for (int64_t j = 0; j < w; ++j)
      accG[j] += load(dyr, j) * ((load(xr, j) - m) * s);
    if (mean)
      for (int64_t j = 0; j < w; ++j)
        accB[j] += load(dyr, j);
  }
}

BRAID_VECTOR_CLONES
void normGradWeightColumns(const float *__restrict dy,
                           const float *__restrict x,
                           const float *__restrict mean,
                           const float *__restrict rstd, int64_t rows,
                           int64_t d, int64_t c0, int64_t w,
                           float *__restrict accG, float *__restrict accB) {
  normGradWeightBody(dy, x, mean, rstd, rows, d, c0, w, accG, accB);
}
BRAID_VECTOR_CLONES
void normGradWeightColumns(const Bf16 *__restrict dy, const Bf16 *__restrict x,
                           const float *__restrict mean,
                           const float *__restrict rstd, int64_t rows,
                           int64_t d, int64_t c0, int64_t w,
                           float *__restrict accG, float *__restrict accB) {
  normGradWeightBody(dy, x, mean, rstd, rows, d, c0, w, accG, accB);
}

// The sums of `w` columns into out[0, w): replacing or adding to what is
// there, in out's storage type.
template <typename U>
void storeColumnSums(const float *acc, int64_t w, bool accumulate, U *out) {
  for (int64_t j = 0; j < w; ++j)
    store(out, j, accumulate ? load(out, j) + acc[j] : acc[j]);
}

template <bool kLayer, typename T, typename U>
void normGradWeightAs(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *x = dataOf<T>(args.ins[1]);
  const float *mean = kLayer ? args.ins[2].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 3 : 2].f32();
  U *dgamma = dataOf<U>(args.outs[0]);
  U *dbeta = kLayer ? dataOf<U>(args.outs[1]) : nullptr;
  const bool accumulate = accumulateOf(args);
  const int64_t d = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  parallelFor(poolOf(args), d, 64, [&](int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0;
    float *accG = threadScratch(0, w);
    float *accB = threadScratch(1, w);
    normGradWeightColumns(dy, x, mean, rstd, rows, d, c0, w, accG, accB);
    storeColumnSums(accG, w, accumulate, dgamma + c0);
    if (kLayer)
      storeColumnSums(accB, w, accumulate, dbeta + c0);
  });
}

// Inputs f32 or bf16; the weight gradients f32, or bf16 over bf16 inputs.
template <bool kLayer> void normGradWeight(const KernelArgs &args) {
  if (!isBf16(args.ins[0]))
    normGradWeightAs<kLayer, float, float>(args);
  else if (isBf16(args.outs[0]))
    normGradWeightAs<kLayer, Bf16, Bf16>(args);
  else
    normGradWeightAs<kLayer, Bf16, float>(args);
}

} // namespace

absl::Status registerNormKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"layer_norm", byStorage<runLayerNorm<float>, runLayerNorm<Bf16>>},
          {"layer_norm_grad_input",
           byStorage<normGradInput<true, float>, normGradInput<true, Bf16>>},
          {"layer_norm_grad_weight", normGradWeight<true>},
          {"rms_norm", byStorage<runRmsNorm<float>, runRmsNorm<Bf16>>},
          {"rms_norm_grad_input",
           byStorage<normGradInput<false, float>, normGradInput<false, Bf16>>},
          {"rms_norm_grad_weight", normGradWeight<false>},
      });
}

} // namespace braid::cpu
