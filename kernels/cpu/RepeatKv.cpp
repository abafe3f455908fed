// repeat_kv and repeat_kv_grad_input: grouped-query heads made explicit.
// Query head h reads kv head h / (H / Hkv); the gradient of a kv head is the
// sum of its H / Hkv copies, added in head order.
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

absl::Status checkRepeatKvLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "repeat_kv_grad_input" : "repeat_kv", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  BRAID_KERNEL_TRY(c.allF32());
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  absl::StatusOr<int64_t> hkv = c.intParam("num_kv_heads", 1, INT32_MAX);
  if (!hkv.ok())
    return hkv.status();
  if (*h % *hkv != 0)
    return c.error(absl::StrCat("num_kv_heads (", *hkv,
                                ") does not divide num_heads (", *h, ")"));
  // The narrow side is x (forward) or dx (backward).
  Operand wide = grad ? c.in(0) : c.out(0);
  Operand narrow = grad ? c.out(0) : c.in(0);
  BRAID_KERNEL_TRY(c.rank(narrow, 3, "[B, S, num_kv_heads*Dh]"));
  if (narrow.dim(2) % *hkv != 0)
    return c.error(absl::StrCat(
        narrow.label, " has shape ", shapeString(narrow.shape()),
        "; its last dimension must be a multiple of num_kv_heads (", *hkv,
        ")"));
  const int64_t dh = narrow.dim(2) / *hkv;
  return c.shape(wide, {narrow.dim(0), narrow.dim(1), *h * dh},
                 absl::StrCat("([B, S, num_heads * Dh] with Dh = ", dh, ")"));
}

absl::Status checkRepeatKv(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, false);
}
absl::Status checkRepeatKvGradInput(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, true);
}

struct Heads {
  int64_t rows, h, hkv, dh;
  Heads(const KernelArgs &args, const TensorDesc &narrow) {
    h = paramsOf(args).intOr("num_heads", 1);
    hkv = paramsOf(args).intOr("num_kv_heads", 1);
    rows = narrow.rows();
    dh = narrow.lastDim() / hkv;
  }
};

void runRepeatKv(const KernelArgs &args) {
  const Heads g(args, *args.ins[0].desc);
  const float *x = args.ins[0].f32();
  float *y = args.outs[0].f32();
  const int64_t group = g.h / g.hkv;
  parallelFor(poolOf(args), g.rows, rowGrain(g.h * g.dh),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r)
                  for (int64_t hi = 0; hi < g.h; ++hi)
                    std::memcpy(y + (r * g.h + hi) * g.dh,
                                x + (r * g.hkv + hi / group) * g.dh,
                                g.dh * sizeof(float));
              });
}

// Rows [r0, r1) of the gradient: each kv head is its first copy plus the
// others in head order.
BRAID_VECTOR_CLONES
void sumCopiesRows(const float *__restrict dy, Heads g, int64_t r0, int64_t r1,
                   float *__restrict dx) {
  const int64_t group = g.h / g.hkv;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t hk = 0; hk < g.hkv; ++hk) {
      float *out = dx + (r * g.hkv + hk) * g.dh;
      const float *src = dy + (r * g.h + hk * group) * g.dh;
      std::memcpy(out, src, g.dh * sizeof(float));
      for (int64_t c = 1; c < group; ++c)
        for (int64_t d = 0; d < g.dh; ++d)
          out[d] += src[c * g.dh + d];
    }
}

void runRepeatKvGradInput(const KernelArgs &args) {
  const Heads g(args, *args.outs[0].desc);
  const float *dy = args.ins[0].f32();
  float *dx = args.outs[0].f32();
  parallelFor(
      poolOf(args), g.rows, rowGrain(g.h * g.dh),
      [&](int64_t r0, int64_t r1) { sumCopiesRows(dy, g, r0, r1, dx); });
}

} // namespace

absl::Status registerRepeatKvKernels(KernelRegistry &registry) {
  return registerAll(
      registry, {
                    {"repeat_kv", Device::kCPU, checkRepeatKv, runRepeatKv},
                    {"repeat_kv_grad_input", Device::kCPU,
                     checkRepeatKvGradInput, runRepeatKvGradInput},
                });
}

} // namespace braid::cpu
