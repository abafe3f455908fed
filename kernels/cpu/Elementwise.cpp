// Element-wise kernels: gelu, swiglu, add, dropout, split, accumulate, fill,
// copy and their gradients. Every element is independent, so work is split
// over flat index ranges (rows for split) and results never depend on the thread
// count. exp goes through expFloat, which vectorises.
//
// Each loop is a template body over the storage type, instantiated in one
// cloned function per type (a cloned function cannot be a template for
// every compiler the project builds with).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/DrawIndex.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

constexpr int64_t kElementGrain = 16384;

// Runs fn(begin, end) over the launch's flat element range [0, n).
template <typename F>
void forElements(const KernelArgs &args, int64_t n, const F &fn) {
  parallelFor(poolOf(args), n, kElementGrain, fn);
}

// --- gelu ---------------------------------------------------------------

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// tanh(u) = 1 - 2 / (exp(2u) + 1): exact limits at both ends, no branch.
BRAID_INLINE float tanhf32(float u) {
  return 1.0f - 2.0f / (expFloat(2.0f * u) + 1.0f);
}

template <typename T>
BRAID_INLINE void geluBody(const T *__restrict x, T *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(x, i);
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    store(y, i, 0.5f * v * (1.0f + t));
  }
}

BRAID_VECTOR_CLONES
void geluLoop(const float *__restrict x, float *__restrict y, int64_t n) {
  geluBody(x, y, n);
}
BRAID_VECTOR_CLONES
void geluLoop(const Bf16 *__restrict x, Bf16 *__restrict y, int64_t n) {
  geluBody(x, y, n);
}

template <typename T> void runGelu(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]);
  T *y = dataOf<T>(args.outs[0]);
  forElements(args, args.ins[0].numel(),
              [&](int64_t b, int64_t e) { geluLoop(x + b, y + b, e - b); });
}

template <typename T>
BRAID_INLINE void geluGradBody(const T *__restrict dy, const T *__restrict x,
                               T *__restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(x, i);
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    store(dx, i,
          load(dy, i) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
  }
}

BRAID_VECTOR_CLONES
void geluGradLoop(const float *__restrict dy, const float *__restrict x,
                  float *__restrict dx, int64_t n) {
  geluGradBody(dy, x, dx, n);
}
BRAID_VECTOR_CLONES
void geluGradLoop(const Bf16 *__restrict dy, const Bf16 *__restrict x,
                  Bf16 *__restrict dx, int64_t n) {
  geluGradBody(dy, x, dx, n);
}

template <typename T> void runGeluGradInput(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *x = dataOf<T>(args.ins[1]);
  T *dx = dataOf<T>(args.outs[0]);
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    geluGradLoop(dy + b, x + b, dx + b, e - b);
  });
}

// --- swiglu -------------------------------------------------------------

BRAID_INLINE float sigmoid(float g) { return 1.0f / (1.0f + expFloat(-g)); }

template <typename T>
BRAID_INLINE void swigluBody(const T *__restrict gate, const T *__restrict up,
                             T *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate, i);
    store(y, i, g * sigmoid(g) * load(up, i));
  }
}

BRAID_VECTOR_CLONES
void swigluLoop(const float *__restrict gate, const float *__restrict up,
                float *__restrict y, int64_t n) {
  swigluBody(gate, up, y, n);
}
BRAID_VECTOR_CLONES
void swigluLoop(const Bf16 *__restrict gate, const Bf16 *__restrict up,
                Bf16 *__restrict y, int64_t n) {
  swigluBody(gate, up, y, n);
}

template <typename T> void runSwiglu(const KernelArgs &args) {
  const T *gate = dataOf<T>(args.ins[0]), *up = dataOf<T>(args.ins[1]);
  T *y = dataOf<T>(args.outs[0]);
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    swigluLoop(gate + b, up + b, y + b, e - b);
  });
}

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
template <typename T>
BRAID_INLINE void swigluGradBody(const T *__restrict dy,
                                 const T *__restrict gate,
                                 const T *__restrict up, T *__restrict dgate,
                                 T *__restrict dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate, i), s = sigmoid(g), d = load(dy, i);
    store(dgate, i, d * load(up, i) * (s * (1.0f + g * (1.0f - s))));
    store(dup, i, d * (g * s));
  }
}

BRAID_VECTOR_CLONES
void swigluGradLoop(const float *__restrict dy, const float *__restrict gate,
                    const float *__restrict up, float *__restrict dgate,
                    float *__restrict dup, int64_t n) {
  swigluGradBody(dy, gate, up, dgate, dup, n);
}
BRAID_VECTOR_CLONES
void swigluGradLoop(const Bf16 *__restrict dy, const Bf16 *__restrict gate,
                    const Bf16 *__restrict up, Bf16 *__restrict dgate,
                    Bf16 *__restrict dup, int64_t n) {
  swigluGradBody(dy, gate, up, dgate, dup, n);
}

template <typename T> void runSwigluGradInput(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]), *gate = dataOf<T>(args.ins[1]),
          *up = dataOf<T>(args.ins[2]);
  T *dgate = dataOf<T>(args.outs[0]), *dup = dataOf<T>(args.outs[1]);
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    swigluGradLoop(dy + b, gate + b, up + b, dgate + b, dup + b, e - b);
  });
}

// --- add, accumulate, fill ----------------------------------------------

template <typename T>
BRAID_INLINE void addBody(const T *__restrict a, const T *__restrict b,
                          T *__restrict c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    store(c, i, load(a, i) + load(b, i));
}

BRAID_VECTOR_CLONES
void addLoop(const float *__restrict a, const float *__restrict b,
             float *__restrict c, int64_t n) {
  addBody(a, b, c, n);
}
BRAID_VECTOR_CLONES
void addLoop(const Bf16 *__restrict a, const Bf16 *__restrict b,
             Bf16 *__restrict c, int64_t n) {
  addBody(a, b, c, n);
}

template <typename T> void runAdd(const KernelArgs &args) {
  const T *a = dataOf<T>(args.ins[0]), *b = dataOf<T>(args.ins[1]);
  T *c = dataOf<T>(args.outs[0]);
  forElements(args, args.ins[0].numel(), [&](int64_t i0, int64_t i1) {
    addLoop(a + i0, b + i0, c + i0, i1 - i0);
  });
}

template <typename T>
BRAID_INLINE void accumulateBody(const T *__restrict x, T *__restrict y,
                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    store(y, i, load(y, i) + load(x, i));
}

BRAID_VECTOR_CLONES
void accumulateLoop(const float *__restrict x, float *__restrict y, int64_t n) {
  accumulateBody(x, y, n);
}
BRAID_VECTOR_CLONES
void accumulateLoop(const Bf16 *__restrict x, Bf16 *__restrict y, int64_t n) {
  accumulateBody(x, y, n);
}

template <typename T> void runAccumulate(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]);
  T *y = dataOf<T>(args.outs[0]);
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    accumulateLoop(x + b, y + b, e - b);
  });
}

// `value` arrives by value: read through the lambda's reference capture, it
// might alias y, and the loop reloaded it for every element.
BRAID_VECTOR_CLONES
void fillLoop(float *__restrict y, float value, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = value;
}
BRAID_VECTOR_CLONES
void fillLoop(Bf16 *__restrict y, Bf16 value, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = value;
}

template <typename T> void runFill(const KernelArgs &args) {
  // The value is rounded to the storage type once, as any store is.
  T value;
  store(&value, 0, static_cast<float>(paramsOf(args).floatOr("value", 0)));
  T *y = dataOf<T>(args.outs[0]);
  forElements(args, args.outs[0].numel(),
              [&](int64_t b, int64_t e) { fillLoop(y + b, value, e - b); });
}

// --- dropout ------------------------------------------------------------

// y[i] = x[i] * mask.factor(first + i). The mask arrives by value: through a
// reference its scale might alias y and was reloaded for every element.
template <typename T>
BRAID_INLINE void dropoutBody(DropoutMask mask, const T *__restrict x,
                              T *__restrict y, int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    store(y, i, load(x, i) * mask.factor(first + i));
}

BRAID_VECTOR_CLONES
void dropoutLoop(DropoutMask mask, const float *__restrict x,
                 float *__restrict y, int64_t first, int64_t n) {
  dropoutBody(mask, x, y, first, n);
}
BRAID_VECTOR_CLONES
void dropoutLoop(DropoutMask mask, const Bf16 *__restrict x,
                 Bf16 *__restrict y, int64_t first, int64_t n) {
  dropoutBody(mask, x, y, first, n);
}

// Forward and backward are the same map, y = x * factor(draw index): the
// mask is drawn again from the same key rather than stored. The draw index
// is the flat index, or with `tp_dim` the element's index in the whole
// tensor (DrawIndex.h), contiguous over each run of a chunk.
template <typename T> void runDropoutLaunch(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]);
  T *y = dataOf<T>(args.outs[0]);
  const KernelParams &p = paramsOf(args);
  const DropoutMask mask = DropoutMask::make(
      p.floatOr("p", 0.0), p.intOr("rng_offset", 0), args);
  const DrawIndex index = DrawIndex::of(args, *args.ins[0].desc);
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    if (!mask.active) {
      convert(x + b, y + b, e - b);
      return;
    }
    for (int64_t i = b; i < e;) {
      const int64_t end = std::min(e, index.runEnd(i));
      dropoutLoop(mask, x + i, y + i, index.at(i), end - i);
      i = end;
    }
  });
}

// --- copy ---------------------------------------------------------------

void runCopy(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  std::memcpy(y.data, x.data,
              static_cast<size_t>(x.numel() * dtypeSize(x.desc->dtype)));
}

// --- split --------------------------------------------------------------

template <typename T> void runSplit(const KernelArgs &args) {
  const T *x = dataOf<T>(args.ins[0]);
  const int64_t parts = static_cast<int64_t>(args.outs.size());
  const int64_t k = args.outs[0].desc->lastDim();
  const int64_t rows = args.outs[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(parts * k),
              [&](int64_t r0, int64_t r1) {
                for (int64_t p = 0; p < parts; ++p) {
                  T *out = dataOf<T>(args.outs[p]);
                  for (int64_t r = r0; r < r1; ++r)
                    convert(x + (r * parts + p) * k, out + r * k, k);
                }
              });
}

template <typename T> void runSplitGradInput(const KernelArgs &args) {
  T *dx = dataOf<T>(args.outs[0]);
  const int64_t parts = static_cast<int64_t>(args.ins.size());
  const int64_t k = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(parts * k),
              [&](int64_t r0, int64_t r1) {
                for (int64_t p = 0; p < parts; ++p) {
                  const T *in = dataOf<T>(args.ins[p]);
                  for (int64_t r = r0; r < r1; ++r)
                    convert(in + r * k, dx + (r * parts + p) * k, k);
                }
              });
}

} // namespace

absl::Status registerElementwiseKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"gelu", byStorage<runGelu<float>, runGelu<Bf16>>},
          {"gelu_grad_input",
           byStorage<runGeluGradInput<float>, runGeluGradInput<Bf16>>},
          {"swiglu", byStorage<runSwiglu<float>, runSwiglu<Bf16>>},
          {"swiglu_grad_input",
           byStorage<runSwigluGradInput<float>, runSwigluGradInput<Bf16>>},
          {"add", byStorage<runAdd<float>, runAdd<Bf16>>},
          {"accumulate", byStorage<runAccumulate<float>, runAccumulate<Bf16>>},
          {"fill", byStorage<runFill<float>, runFill<Bf16>>},
          {"copy", runCopy},
          {"dropout",
           byStorage<runDropoutLaunch<float>, runDropoutLaunch<Bf16>>},
          {"dropout_grad_input",
           byStorage<runDropoutLaunch<float>, runDropoutLaunch<Bf16>>},
          {"split", byStorage<runSplit<float>, runSplit<Bf16>>},
          {"split_grad_input",
           byStorage<runSplitGradInput<float>, runSplitGradInput<Bf16>>},
      });
}

} // namespace braid::cpu
