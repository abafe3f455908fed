// Element-wise kernels: gelu, swiglu, add, dropout, split, accumulate, fill
// and their gradients. Every element is independent, so work is split over
// flat index ranges (rows for split) and results never depend on the thread
// count. exp goes through expFloat, which vectorises.
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

constexpr int64_t kElementGrain = 16384;

// Every input and output f32 with the shape of input 0.
absl::Status checkSameShapes(LaunchChecker &c) {
  BRAID_KERNEL_TRY(c.allF32());
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.in(i), c.in(0)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.out(i), c.in(0)));
  return absl::OkStatus();
}

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

absl::Status checkGelu(const KernelSignature &sig) {
  LaunchChecker c("gelu", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

BRAID_VECTOR_CLONES
void geluLoop(const float *__restrict x, float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

void runGelu(const KernelArgs &args) {
  const float *x = args.ins[0].f32();
  float *y = args.outs[0].f32();
  forElements(args, args.ins[0].numel(),
              [&](int64_t b, int64_t e) { geluLoop(x + b, y + b, e - b); });
}

absl::Status checkGeluGradInput(const KernelSignature &sig) {
  LaunchChecker c("gelu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "x"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  return checkSameShapes(c);
}

BRAID_VECTOR_CLONES
void geluGradLoop(const float *__restrict dy, const float *__restrict x,
                  float *__restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanhf32(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

void runGeluGradInput(const KernelArgs &args) {
  const float *dy = args.ins[0].f32(), *x = args.ins[1].f32();
  float *dx = args.outs[0].f32();
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    geluGradLoop(dy + b, x + b, dx + b, e - b);
  });
}

// --- swiglu -------------------------------------------------------------

BRAID_INLINE float sigmoid(float g) { return 1.0f / (1.0f + expFloat(-g)); }

absl::Status checkSwiglu(const KernelSignature &sig) {
  LaunchChecker c("swiglu", sig);
  BRAID_KERNEL_TRY(c.inputs({"gate", "up"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

BRAID_VECTOR_CLONES
void swigluLoop(const float *__restrict gate, const float *__restrict up,
                float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

void runSwiglu(const KernelArgs &args) {
  const float *gate = args.ins[0].f32(), *up = args.ins[1].f32();
  float *y = args.outs[0].f32();
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    swigluLoop(gate + b, up + b, y + b, e - b);
  });
}

absl::Status checkSwigluGradInput(const KernelSignature &sig) {
  LaunchChecker c("swiglu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "gate", "up"}));
  BRAID_KERNEL_TRY(c.outputs({"dgate", "dup"}));
  return checkSameShapes(c);
}

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
BRAID_VECTOR_CLONES
void swigluGradLoop(const float *__restrict dy, const float *__restrict gate,
                    const float *__restrict up, float *__restrict dgate,
                    float *__restrict dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], s = sigmoid(g);
    dgate[i] = dy[i] * up[i] * (s * (1.0f + g * (1.0f - s)));
    dup[i] = dy[i] * (g * s);
  }
}

void runSwigluGradInput(const KernelArgs &args) {
  const float *dy = args.ins[0].f32(), *gate = args.ins[1].f32(),
              *up = args.ins[2].f32();
  float *dgate = args.outs[0].f32(), *dup = args.outs[1].f32();
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    swigluGradLoop(dy + b, gate + b, up + b, dgate + b, dup + b, e - b);
  });
}

// --- add, accumulate, fill ----------------------------------------------

absl::Status checkAdd(const KernelSignature &sig) {
  LaunchChecker c("add", sig);
  BRAID_KERNEL_TRY(c.inputs({"a", "b"}));
  BRAID_KERNEL_TRY(c.outputs({"c"}));
  return checkSameShapes(c);
}

BRAID_VECTOR_CLONES
void addLoop(const float *__restrict a, const float *__restrict b,
             float *__restrict c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i];
}

void runAdd(const KernelArgs &args) {
  const float *a = args.ins[0].f32(), *b = args.ins[1].f32();
  float *c = args.outs[0].f32();
  forElements(args, args.ins[0].numel(), [&](int64_t i0, int64_t i1) {
    addLoop(a + i0, b + i0, c + i0, i1 - i0);
  });
}

absl::Status checkAccumulate(const KernelSignature &sig) {
  LaunchChecker c("accumulate", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

BRAID_VECTOR_CLONES
void accumulateLoop(const float *__restrict x, float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

void runAccumulate(const KernelArgs &args) {
  const float *x = args.ins[0].f32();
  float *y = args.outs[0].f32();
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    accumulateLoop(x + b, y + b, e - b);
  });
}

absl::Status checkFill(const KernelSignature &sig) {
  LaunchChecker c("fill", sig);
  BRAID_KERNEL_TRY(c.inputs({}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(c.allF32());
  return c.floatParam("value").status();
}

// `value` arrives by value: read through the lambda's reference capture, it
// might alias y, and the loop reloaded it for every element.
BRAID_VECTOR_CLONES
void fillLoop(float *__restrict y, float value, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = value;
}

void runFill(const KernelArgs &args) {
  const float value = static_cast<float>(paramsOf(args).floatOr("value", 0));
  float *y = args.outs[0].f32();
  forElements(args, args.outs[0].numel(),
              [&](int64_t b, int64_t e) { fillLoop(y + b, value, e - b); });
}

// --- dropout ------------------------------------------------------------

absl::Status checkDropoutLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "dropout_grad_input" : "dropout", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  BRAID_KERNEL_TRY(checkSameShapes(c));
  absl::StatusOr<double> p = c.floatParam("p");
  if (!p.ok())
    return p.status();
  if (*p < 0 || *p >= 1)
    return c.error(
        absl::StrCat("parameter 'p' is ", *p, ", expected 0 <= p < 1"));
  return c.intParam("rng_offset", 0, INT64_MAX).status();
}

absl::Status checkDropout(const KernelSignature &sig) {
  return checkDropoutLaunch(sig, false);
}
absl::Status checkDropoutGradInput(const KernelSignature &sig) {
  return checkDropoutLaunch(sig, true);
}

// y[i] = x[i] * mask.factor(first + i). The mask arrives by value: through a
// reference its scale might alias y and was reloaded for every element.
BRAID_VECTOR_CLONES
void dropoutLoop(DropoutMask mask, const float *__restrict x,
                 float *__restrict y, int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * mask.factor(first + i);
}

// Forward and backward are the same map, y = x * factor(flat index): the
// mask is drawn again from the same key rather than stored.
void runDropoutLaunch(const KernelArgs &args) {
  const float *x = args.ins[0].f32();
  float *y = args.outs[0].f32();
  const KernelParams &p = paramsOf(args);
  const DropoutMask mask = DropoutMask::make(
      p.floatOr("p", 0.0), p.intOr("rng_offset", 0), contextOf(args));
  forElements(args, args.ins[0].numel(), [&](int64_t b, int64_t e) {
    if (!mask.active) {
      std::memcpy(y + b, x + b, (e - b) * sizeof(float));
      return;
    }
    dropoutLoop(mask, x + b, y + b, b, e - b);
  });
}

// --- split --------------------------------------------------------------

absl::Status checkSplit(const KernelSignature &sig) {
  LaunchChecker c("split", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.variadicOutputs("part"));
  BRAID_KERNEL_TRY(c.allF32());
  Operand x = c.in(0), first = c.out(0);
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., n*K]"));
  const int64_t k = first.rank() == 0 ? -1 : first.lastDim();
  if (k < 0 || x.lastDim() != c.numOuts() * k)
    return c.error(absl::StrCat(
        x.label, " has shape ", shapeString(x.shape()), ", expected [..., ",
        c.numOuts(), " * K]: ", c.numOuts(),
        " outputs of last dimension K = ", k < 0 ? "(none)" : absl::StrCat(k)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.shape(c.out(i), withLastDim(*x.desc, k),
                             "(x's leading dimensions, then K)"));
  return absl::OkStatus();
}

void runSplit(const KernelArgs &args) {
  const float *x = args.ins[0].f32();
  const int64_t parts = static_cast<int64_t>(args.outs.size());
  const int64_t k = args.outs[0].desc->lastDim();
  const int64_t rows = args.outs[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(parts * k),
              [&](int64_t r0, int64_t r1) {
                for (int64_t p = 0; p < parts; ++p) {
                  float *out = args.outs[p].f32();
                  for (int64_t r = r0; r < r1; ++r)
                    std::memcpy(out + r * k, x + (r * parts + p) * k,
                                k * sizeof(float));
                }
              });
}

absl::Status checkSplitGradInput(const KernelSignature &sig) {
  LaunchChecker c("split_grad_input", sig);
  BRAID_KERNEL_TRY(c.variadicInputs("dpart"));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  BRAID_KERNEL_TRY(c.allF32());
  Operand first = c.in(0);
  BRAID_KERNEL_TRY(c.minRank(first, 1, "[..., K]"));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.in(i), first));
  return c.shape(c.out(0),
                 withLastDim(*first.desc, c.numIns() * first.lastDim()),
                 absl::StrCat("(the parts' leading dimensions, then ",
                              c.numIns(), " * K)"));
}

void runSplitGradInput(const KernelArgs &args) {
  float *dx = args.outs[0].f32();
  const int64_t parts = static_cast<int64_t>(args.ins.size());
  const int64_t k = args.ins[0].desc->lastDim();
  const int64_t rows = args.ins[0].desc->rows();
  parallelFor(poolOf(args), rows, rowGrain(parts * k),
              [&](int64_t r0, int64_t r1) {
                for (int64_t p = 0; p < parts; ++p) {
                  const float *in = args.ins[p].f32();
                  for (int64_t r = r0; r < r1; ++r)
                    std::memcpy(dx + (r * parts + p) * k, in + r * k,
                                k * sizeof(float));
                }
              });
}

} // namespace

absl::Status registerElementwiseKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"gelu", Device::kCPU, checkGelu, runGelu},
          {"gelu_grad_input", Device::kCPU, checkGeluGradInput,
           runGeluGradInput},
          {"swiglu", Device::kCPU, checkSwiglu, runSwiglu},
          {"swiglu_grad_input", Device::kCPU, checkSwigluGradInput,
           runSwigluGradInput},
          {"add", Device::kCPU, checkAdd, runAdd},
          {"accumulate", Device::kCPU, checkAccumulate, runAccumulate},
          {"fill", Device::kCPU, checkFill, runFill},
          {"dropout", Device::kCPU, checkDropout, runDropoutLaunch},
          {"dropout_grad_input", Device::kCPU, checkDropoutGradInput,
           runDropoutLaunch},
          {"split", Device::kCPU, checkSplit, runSplit},
          {"split_grad_input", Device::kCPU, checkSplitGradInput,
           runSplitGradInput},
      });
}

} // namespace braid::cpu
