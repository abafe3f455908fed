// Fused norm, activation, dropout and RoPE kernels (docs/fusion.md).
//
// Each kernel computes its group's formula in f32 and rounds each stored
// output once (docs/kernels.md, "Storage precision"). In f32 storage that
// is the unfused kernels' arithmetic in their order, so the results are
// their bits: the row loops use the reductions of VecMath.h with the lane
// layout of Norms.cpp, and the GEMMs make the sgemm calls of Linear.cpp. In
// bf16 storage the intermediates the unfused kernels would round (the
// dropped branch, the sum a norm reads, a biased pre-activation) stay f32.
// Rows (or positions) are independent, so the work split never changes a
// result.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/common/DrawIndex.h"
#include "kernels/common/SequenceLayout.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/SharedLoops.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// Per-thread rows of f32: slot 0 to 7, reused across launches.
float *rowScratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[8];
  std::vector<float> &b = buffers[slot];
  if (b.size() < n)
    b.resize(n);
  return b.data();
}

// Row `r` of a [rows, d] tensor as f32: the row itself for f32 storage, its
// widened copy in `scratch` for bf16.
template <typename T>
const float *readRow(const T *base, int64_t r, int64_t d, float *scratch) {
  return asF32(base + r * d, d, scratch);
}

// Where a kernel computes row `r` of an output: in place for f32, in
// `scratch` for bf16 (then writeRow rounds it into place).
template <typename T>
float *outRow(T *base, int64_t r, int64_t d, float *scratch) {
  if constexpr (std::is_same_v<T, float>)
    return base + r * d;
  else
    return scratch;
}
template <typename T>
void writeRow(const float *row, T *base, int64_t r, int64_t d) {
  if constexpr (!std::is_same_v<T, float>)
    convert(row, base + r * d, d);
}

DropoutMask maskOf(const KernelArgs &args) {
  const KernelParams &p = paramsOf(args);
  return DropoutMask::make(p.floatOr("p", 0.0), p.intOr("rng_offset", 0),
                           args);
}

// --- add + norm --------------------------------------------------------------

// c = a + b * factor(first + i), or a + b when the mask is inactive: the
// `dropout` then `add` of the unfused graph.
BRAID_VECTOR_CLONES
void addDroppedRow(DropoutMask mask, const float *__restrict a,
                   const float *__restrict b, float *__restrict c,
                   int64_t first, int64_t n) {
  if (!mask.active) {
    for (int64_t i = 0; i < n; ++i)
      c[i] = a[i] + b[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i] * mask.factor(first + i);
}

BRAID_VECTOR_CLONES
void layerNormRow(const float *__restrict x, const float *__restrict gamma,
                  const float *__restrict beta, float eps, int64_t d,
                  float *__restrict y, float *__restrict mean,
                  float *__restrict rstd) {
  const float m = sum(x, d) / static_cast<float>(d);
  const float var = sumSqDiff(x, m, d) / static_cast<float>(d);
  const float s = 1.0f / std::sqrt(var + eps);
  for (int64_t j = 0; j < d; ++j)
    y[j] = (x[j] - m) * s * gamma[j] + beta[j];
  *mean = m;
  *rstd = s;
}

BRAID_VECTOR_CLONES
void rmsNormRow(const float *__restrict x, const float *__restrict gamma,
                float eps, int64_t d, float *__restrict y,
                float *__restrict rstd) {
  const float s = 1.0f / std::sqrt(dot(x, x, d) / static_cast<float>(d) + eps);
  for (int64_t j = 0; j < d; ++j)
    y[j] = x[j] * s * gamma[j];
  *rstd = s;
}

// dx = dres + rstd * (g - mean(g) - xhat * mean(g * xhat)) for one row
// (mean null for RMSNorm), its means those of layer_norm_grad_input
// (normGradMeans).
BRAID_VECTOR_CLONES
void addNormGradRow(const float *__restrict dy, const float *__restrict x,
                    const float *__restrict gamma, const float *__restrict mean,
                    float rstd, const float *__restrict dres, int64_t d,
                    float *__restrict dx) {
  const float invD = 1.0f / static_cast<float>(d);
  const float m = mean ? *mean : 0.0f, s = rstd;
  float meanG, meanGX;
  normGradMeans(dy, x, gamma, m, s, mean != nullptr, d, invD, &meanG, &meanGX);
  for (int64_t j = 0; j < d; ++j) {
    const float xhat = (x[j] - m) * s;
    dx[j] = dres[j] + s * (dy[j] * gamma[j] - meanG - xhat * meanGX);
  }
}

// ins: residual, branch, gamma (, beta); outs: sum, y (, mean), rstd.
template <bool kLayer, typename T> void runFusedAddNorm(const KernelArgs &args) {
  const T *res = dataOf<T>(args.ins[0]), *br = dataOf<T>(args.ins[1]),
          *gamma = dataOf<T>(args.ins[2]);
  const T *beta = kLayer ? dataOf<T>(args.ins[3]) : nullptr;
  T *sumOut = dataOf<T>(args.outs[0]), *y = dataOf<T>(args.outs[1]);
  float *mean = kLayer ? args.outs[2].f32() : nullptr;
  float *rstd = args.outs[kLayer ? 3 : 2].f32();
  const int64_t d = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const float eps = static_cast<float>(paramsOf(args).floatOr("eps", 1e-5));
  const DropoutMask mask = maskOf(args);
  // Draw indices of x's elements (tp_dim: the whole tensor's); a row never
  // straddles two chunks of DrawIndex.
  const DrawIndex index = DrawIndex::of(args, *args.ins[1].desc);
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    const float *g = asF32(gamma, d, rowScratch(0, d));
    const float *bt = kLayer ? asF32(beta, d, rowScratch(1, d)) : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
      const float *a = readRow(res, r, d, rowScratch(2, d));
      const float *b = readRow(br, r, d, rowScratch(3, d));
      float *s = outRow(sumOut, r, d, rowScratch(4, d));
      addDroppedRow(mask, a, b, s, index.at(r * d), d);
      writeRow(s, sumOut, r, d);
      float *yr = outRow(y, r, d, rowScratch(5, d));
      if constexpr (kLayer)
        layerNormRow(s, g, bt, eps, d, yr, mean + r, rstd + r);
      else
        rmsNormRow(s, g, eps, d, yr, rstd + r);
      writeRow(yr, y, r, d);
    }
  });
}

// ins: dy, x, gamma, (mean,) rstd, dresidual; out: dx = dresidual + the
// norm's input gradient.
template <bool kLayer, typename T>
void runFusedAddNormGrad(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *x = dataOf<T>(args.ins[1]),
          *gamma = dataOf<T>(args.ins[2]);
  const float *mean = kLayer ? args.ins[3].f32() : nullptr;
  const float *rstd = args.ins[kLayer ? 4 : 3].f32();
  const T *dres = dataOf<T>(args.ins[kLayer ? 5 : 4]);
  T *dx = dataOf<T>(args.outs[0]);
  const int64_t d = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  if (d == 0)
    return;
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    const float *g = asF32(gamma, d, rowScratch(0, d));
    for (int64_t r = r0; r < r1; ++r) {
      const float *dyr = readRow(dy, r, d, rowScratch(1, d));
      const float *xr = readRow(x, r, d, rowScratch(2, d));
      const float *dr = readRow(dres, r, d, rowScratch(3, d));
      float *out = outRow(dx, r, d, rowScratch(4, d));
      addNormGradRow(dyr, xr, g, mean ? mean + r : nullptr, rstd[r], dr, d,
                     out);
      writeRow(out, dx, r, d);
    }
  });
}

// --- bias + GELU, bias + SwiGLU, bias + dropout + add -----------------------

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// tanh and sigmoid through expFloat, as Elementwise.cpp computes them.
BRAID_INLINE float tanhf32(float u) {
  return 1.0f - 2.0f / (expFloat(2.0f * u) + 1.0f);
}
BRAID_INLINE float sigmoid(float g) { return 1.0f / (1.0f + expFloat(-g)); }

BRAID_VECTOR_CLONES
void biasGeluRow(const float *__restrict h, const float *__restrict b,
                 float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = h[i] + b[i];
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

BRAID_VECTOR_CLONES
void biasGeluGradRow(const float *__restrict dy, const float *__restrict h,
                     const float *__restrict b, float *__restrict dx,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = h[i] + b[i];
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

BRAID_VECTOR_CLONES
void biasSwigluRow(const float *__restrict gate, const float *__restrict up,
                   const float *__restrict bg, const float *__restrict bu,
                   float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i] + bg[i];
    y[i] = g * sigmoid(g) * (up[i] + bu[i]);
  }
}

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
BRAID_VECTOR_CLONES
void biasSwigluGradRow(const float *__restrict dy, const float *__restrict gate,
                       const float *__restrict up, const float *__restrict bg,
                       const float *__restrict bu, float *__restrict dgate,
                       float *__restrict dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i] + bg[i], u = up[i] + bu[i];
    const float s = sigmoid(g), d = dy[i];
    dgate[i] = d * u * (s * (1.0f + g * (1.0f - s)));
    dup[i] = d * (g * s);
  }
}

// y = r + dropout(h + b).
BRAID_VECTOR_CLONES
void biasDropoutAddRow(DropoutMask mask, const float *__restrict h,
                       const float *__restrict b, const float *__restrict r,
                       float *__restrict y, int64_t first, int64_t n) {
  if (!mask.active) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = r[i] + (h[i] + b[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    y[i] = r[i] + (h[i] + b[i]) * mask.factor(first + i);
}

// ins: h [..., M], b [M]; out: y.
template <typename T> void runFusedBiasGelu(const KernelArgs &args) {
  const T *h = dataOf<T>(args.ins[0]), *bias = dataOf<T>(args.ins[1]);
  T *y = dataOf<T>(args.outs[0]);
  const int64_t m = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    const float *b = asF32(bias, m, rowScratch(0, m));
    for (int64_t r = r0; r < r1; ++r) {
      const float *hr = readRow(h, r, m, rowScratch(1, m));
      float *yr = outRow(y, r, m, rowScratch(2, m));
      biasGeluRow(hr, b, yr, m);
      writeRow(yr, y, r, m);
    }
  });
}

// ins: dy, h, b; out: dh.
template <typename T> void runFusedBiasGeluGrad(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *h = dataOf<T>(args.ins[1]),
          *bias = dataOf<T>(args.ins[2]);
  T *dx = dataOf<T>(args.outs[0]);
  const int64_t m = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    const float *b = asF32(bias, m, rowScratch(0, m));
    for (int64_t r = r0; r < r1; ++r) {
      const float *dyr = readRow(dy, r, m, rowScratch(1, m));
      const float *hr = readRow(h, r, m, rowScratch(2, m));
      float *out = outRow(dx, r, m, rowScratch(3, m));
      biasGeluGradRow(dyr, hr, b, out, m);
      writeRow(out, dx, r, m);
    }
  });
}

// ins: gate, up [..., F], bg, bu [F]; out: y.
template <typename T> void runFusedBiasSwiglu(const KernelArgs &args) {
  const T *gate = dataOf<T>(args.ins[0]), *up = dataOf<T>(args.ins[1]),
          *bg = dataOf<T>(args.ins[2]), *bu = dataOf<T>(args.ins[3]);
  T *y = dataOf<T>(args.outs[0]);
  const int64_t m = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    const float *g = asF32(bg, m, rowScratch(0, m));
    const float *u = asF32(bu, m, rowScratch(1, m));
    for (int64_t r = r0; r < r1; ++r) {
      const float *gr = readRow(gate, r, m, rowScratch(2, m));
      const float *ur = readRow(up, r, m, rowScratch(3, m));
      float *yr = outRow(y, r, m, rowScratch(4, m));
      biasSwigluRow(gr, ur, g, u, yr, m);
      writeRow(yr, y, r, m);
    }
  });
}

// ins: dy, gate, up, bg, bu; outs: dgate, dup.
template <typename T> void runFusedBiasSwigluGrad(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *gate = dataOf<T>(args.ins[1]),
          *up = dataOf<T>(args.ins[2]), *bg = dataOf<T>(args.ins[3]),
          *bu = dataOf<T>(args.ins[4]);
  T *dgate = dataOf<T>(args.outs[0]), *dup = dataOf<T>(args.outs[1]);
  const int64_t m = args.ins[1].desc->lastDim(),
                rows = args.ins[1].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    const float *g = asF32(bg, m, rowScratch(0, m));
    const float *u = asF32(bu, m, rowScratch(1, m));
    for (int64_t r = r0; r < r1; ++r) {
      const float *dyr = readRow(dy, r, m, rowScratch(2, m));
      const float *gr = readRow(gate, r, m, rowScratch(3, m));
      const float *ur = readRow(up, r, m, rowScratch(4, m));
      float *dg = outRow(dgate, r, m, rowScratch(5, m));
      float *du = outRow(dup, r, m, rowScratch(6, m));
      biasSwigluGradRow(dyr, gr, ur, g, u, dg, du, m);
      writeRow(dg, dgate, r, m);
      writeRow(du, dup, r, m);
    }
  });
}

// ins: h [..., M], b [M], residual; out: y.
template <typename T> void runFusedBiasDropoutAdd(const KernelArgs &args) {
  const T *h = dataOf<T>(args.ins[0]), *bias = dataOf<T>(args.ins[1]),
          *res = dataOf<T>(args.ins[2]);
  T *y = dataOf<T>(args.outs[0]);
  const int64_t m = args.ins[0].desc->lastDim(),
                rows = args.ins[0].desc->rows();
  const DropoutMask mask = maskOf(args);
  const DrawIndex index = DrawIndex::of(args, *args.ins[0].desc);
  parallelFor(poolOf(args), rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    const float *b = asF32(bias, m, rowScratch(0, m));
    for (int64_t r = r0; r < r1; ++r) {
      const float *hr = readRow(h, r, m, rowScratch(1, m));
      const float *rr = readRow(res, r, m, rowScratch(2, m));
      float *yr = outRow(y, r, m, rowScratch(3, m));
      biasDropoutAddRow(mask, hr, b, rr, yr, index.at(r * m), m);
      writeRow(yr, y, r, m);
    }
  });
}

// --- RoPE in the projection's epilogue ----------------------------------------

// The cosines and sines of every row of the sequence dimension, computed as
// the rope kernels compute them (angle in double, rounded to float): row r,
// at position map.at(r) (with `cp` a CP rank's part, SequenceLayout.h),
// holds `half` cosines then `half` sines, the sines times `sign`.
std::vector<float> &ropeTable(ThreadPool *pool, const SequenceMap &map,
                              int64_t half, double theta, int sign) {
  const int64_t s = map.len;
  thread_local std::vector<float> table;
  table.resize(s * 2 * half);
  std::vector<double> freq(half);
  for (int64_t i = 0; i < half; ++i)
    freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / (2 * half));
  float *t = table.data();
  parallelFor(pool, s, rowGrain(2 * half), [&](int64_t s0, int64_t s1) {
    for (int64_t r = s0; r < s1; ++r) {
      const double pos = static_cast<double>(map.at(r));
      for (int64_t i = 0; i < half; ++i) {
        const float a = static_cast<float>(pos * freq[i]);
        t[r * 2 * half + i] = std::cos(a);
        t[r * 2 * half + half + i] = sign * std::sin(a);
      }
    }
  });
  return table;
}

// The positions of the s rows of the sequence dimension: this CP rank's
// part with `cp`, else the sequence itself.
SequenceMap sequenceOf(const KernelArgs &args, int64_t s) {
  const KernelContext &ctx = contextOf(args);
  return paramsOf(args).intOr("cp", 0) != 0
             ? SequenceMap::part(s, ctx.cpRank, ctx.cpSize)
             : SequenceMap::whole(s);
}

// Turns the pairs (i, i + half) of every head of one row in place by the
// angles whose cosines and sines are cosA[i] and sinA[i].
BRAID_VECTOR_CLONES
void rotateRowInPlace(float *__restrict x, int64_t width, int64_t half,
                      const float *__restrict cosA,
                      const float *__restrict sinA) {
  for (int64_t h0 = 0; h0 < width; h0 += 2 * half) {
    float *xa = x + h0, *xb = xa + half;
    for (int64_t i = 0; i < half; ++i) {
      const float a = xa[i], b = xb[i];
      xa[i] = a * cosA[i] - b * sinA[i];
      xb[i] = b * cosA[i] + a * sinA[i];
    }
  }
}

// Rotates rows [0, rows) of x (width floats each), row i at sequence
// position (firstRow + i) % s.
void rotateRows(ThreadPool *pool, float *x, int64_t rows, int64_t firstRow,
                int64_t s, int64_t width, int64_t half,
                const std::vector<float> &table) {
  if (half == 0)
    return;
  parallelFor(pool, rows, rowGrain(width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *cs = table.data() + ((firstRow + r) % s) * 2 * half;
      rotateRowInPlace(x + r * width, width, half, cs, cs + half);
    }
  });
}

// The floats a bf16 GEMM panel may hold at once, as in Linear.cpp, so that
// each element is summed by sgemm calls of the same shape.
constexpr int64_t kPanelFloats = int64_t{1} << 20;

int64_t panelRows(int64_t floatsPerRow) {
  return std::max<int64_t>(1,
                           kPanelFloats / std::max<int64_t>(1, floatsPerRow));
}

// Per-launch scratch of the launching thread (rowScratch belongs to the
// pool's chunks, and chunk 0 runs on this thread).
float *gemmScratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[3];
  std::vector<float> &b = buffers[slot];
  if (b.size() < static_cast<size_t>(n))
    b.resize(n);
  return b.data();
}

// y [n, m] = x [n, k] w^T (+ b): Linear.cpp's sgemm call.
void projectF32(const float *x, const float *w, const float *bias, int64_t n,
                int64_t k, int64_t m, float *y) {
  if (bias)
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(y + r * m, bias, m * sizeof(float));
  else if (k == 0)
    std::memset(y, 0, n * m * sizeof(float));
  if (k > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, k,
                w, k, bias ? 1.0f : 0.0f, y, m);
}

// ins: x [B, S, K], w [M, K], optional b [M]; out: y [B, S, M].
template <typename T> void runFusedLinearRope(const KernelArgs &args) {
  const TensorDesc &xd = *args.ins[0].desc;
  const T *x = dataOf<T>(args.ins[0]), *w = dataOf<T>(args.ins[1]);
  const T *bias = args.ins.size() == 3 ? dataOf<T>(args.ins[2]) : nullptr;
  T *y = dataOf<T>(args.outs[0]);
  const int64_t s = xd.shape[1], k = xd.shape[2];
  const int64_t n = xd.shape[0] * s, m = args.ins[1].desc->shape[0];
  const int64_t heads = paramsOf(args).intOr("num_heads", 1);
  const double theta = paramsOf(args).floatOr("theta", 10000.0);
  if (n == 0 || m == 0)
    return;
  ThreadPool *pool = poolOf(args);
  const int64_t half = m / heads / 2;
  const std::vector<float> &table =
      ropeTable(pool, sequenceOf(args, s), half, theta, 1);
  if constexpr (std::is_same_v<T, float>) {
    projectF32(x, w, bias, n, k, m, y);
    rotateRows(pool, y, n, 0, s, m, half, table);
  } else {
    float *wF = gemmScratch(0, m * k);
    widenMatrix(pool, w, k, m, k, wF);
    std::vector<float> bF;
    if (bias) {
      bF.resize(m);
      convert(bias, bF.data(), m);
    }
    const int64_t panel = panelRows(k + m);
    for (int64_t r0 = 0; r0 < n; r0 += panel) {
      const int64_t rows = std::min(panel, n - r0);
      float *xF = gemmScratch(1, rows * k), *yF = gemmScratch(2, rows * m);
      widenMatrix(pool, x + r0 * k, k, rows, k, xF);
      projectF32(xF, wF, bias ? bF.data() : nullptr, rows, k, m, yF);
      rotateRows(pool, yF, rows, r0, s, m, half, table);
      roundMatrix(pool, yF, rows, m, y + r0 * m, m);
    }
  }
}

// ins: dy [B, S, M], w [M, K]; outs: dx [B, S, K], dlinear [B, S, M].
template <typename T> void runFusedLinearRopeGrad(const KernelArgs &args) {
  const TensorDesc &dyd = *args.ins[0].desc;
  const T *dy = dataOf<T>(args.ins[0]), *w = dataOf<T>(args.ins[1]);
  T *dx = dataOf<T>(args.outs[0]), *dl = dataOf<T>(args.outs[1]);
  const int64_t s = dyd.shape[1], m = dyd.shape[2];
  const int64_t n = dyd.shape[0] * s, k = args.ins[1].desc->shape[1];
  const int64_t heads = paramsOf(args).intOr("num_heads", 1);
  const double theta = paramsOf(args).floatOr("theta", 10000.0);
  if (n == 0)
    return;
  ThreadPool *pool = poolOf(args);
  const int64_t half = m / heads / 2;
  const std::vector<float> &table =
      ropeTable(pool, sequenceOf(args, s), half, theta, -1);
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dl, dy, n * m * sizeof(float));
    rotateRows(pool, dl, n, 0, s, m, half, table);
    if (k == 0)
      return;
    if (m == 0) {
      std::memset(dx, 0, n * k * sizeof(float));
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, m, 1.0f, dl,
                m, w, k, 0.0f, dx, k);
  } else {
    float *wF = gemmScratch(0, m * k);
    widenMatrix(pool, w, k, m, k, wF);
    const int64_t panel = panelRows(m + k);
    for (int64_t r0 = 0; r0 < n; r0 += panel) {
      const int64_t rows = std::min(panel, n - r0);
      float *dlF = gemmScratch(1, rows * m), *dxF = gemmScratch(2, rows * k);
      widenMatrix(pool, dy + r0 * m, m, rows, m, dlF);
      rotateRows(pool, dlF, rows, r0, s, m, half, table);
      roundMatrix(pool, dlF, rows, m, dl + r0 * m, m);
      if (k == 0)
        continue;
      if (m == 0) {
        std::memset(dxF, 0, rows * k * sizeof(float));
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, k, m,
                    1.0f, dlF, m, wF, k, 0.0f, dxF, k);
      }
      roundMatrix(pool, dxF, rows, k, dx + r0 * k, k);
    }
  }
}

} // namespace

absl::Status registerFusedElementwiseKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"fused_add_layer_norm", byStorage<runFusedAddNorm<true, float>,
                                             runFusedAddNorm<true, Bf16>>},
          {"fused_add_layer_norm_grad_input",
           byStorage<runFusedAddNormGrad<true, float>,
                     runFusedAddNormGrad<true, Bf16>>},
          {"fused_add_rms_norm", byStorage<runFusedAddNorm<false, float>,
                                           runFusedAddNorm<false, Bf16>>},
          {"fused_add_rms_norm_grad_input",
           byStorage<runFusedAddNormGrad<false, float>,
                     runFusedAddNormGrad<false, Bf16>>},
          {"fused_bias_swiglu",
           byStorage<runFusedBiasSwiglu<float>, runFusedBiasSwiglu<Bf16>>},
          {"fused_bias_swiglu_grad_input",
           byStorage<runFusedBiasSwigluGrad<float>,
                     runFusedBiasSwigluGrad<Bf16>>},
          {"fused_linear_rope",
           byStorage<runFusedLinearRope<float>, runFusedLinearRope<Bf16>>},
          {"fused_linear_rope_grad_input",
           byStorage<runFusedLinearRopeGrad<float>,
                     runFusedLinearRopeGrad<Bf16>>},
          {"fused_bias_gelu",
           byStorage<runFusedBiasGelu<float>, runFusedBiasGelu<Bf16>>},
          {"fused_bias_gelu_grad_input",
           byStorage<runFusedBiasGeluGrad<float>, runFusedBiasGeluGrad<Bf16>>},
          {"fused_bias_dropout_add", byStorage<runFusedBiasDropoutAdd<float>,
                                               runFusedBiasDropoutAdd<Bf16>>},
      });
}

} // namespace braid::cpu
