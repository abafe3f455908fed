// repeat_kv and repeat_kv_grad_input: grouped-query heads made explicit.
// Query head h reads kv head h / (H / Hkv); the gradient of a kv head is the
// sum of its H / Hkv copies, added in head order.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

struct Heads {
  int64_t rows, h, hkv, dh;
  Heads(const KernelArgs &args, const TensorDesc &narrow) {
    h = paramsOf(args).intOr("num_heads", 1);
    hkv = paramsOf(args).intOr("num_kv_heads", 1);
    rows = narrow.rows();
    dh = narrow.lastDim() / hkv;
  }
};

// A copy of bits: the same for every storage type of `size` bytes.
void runRepeatKv(const KernelArgs &args) {
  const Heads g(args, *args.ins[0].desc);
  const int64_t size = dtypeSize(args.ins[0].desc->dtype);
  const char *x = static_cast<const char *>(args.ins[0].data);
  char *y = static_cast<char *>(args.outs[0].data);
  const int64_t group = g.h / g.hkv;
  parallelFor(poolOf(args), g.rows, rowGrain(g.h * g.dh),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r)
                  for (int64_t hi = 0; hi < g.h; ++hi)
                    std::memcpy(y + (r * g.h + hi) * g.dh * size,
                                x + (r * g.hkv + hi / group) * g.dh * size,
                                g.dh * size);
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

// bf16: the copies of one kv head are summed in f32 and rounded once.
void sumCopiesRows(const Bf16 *dy, Heads g, int64_t r0, int64_t r1, Bf16 *dx) {
  const int64_t group = g.h / g.hkv;
  float *acc = threadScratch(0, g.dh), *copy = threadScratch(1, g.dh);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t hk = 0; hk < g.hkv; ++hk) {
      const Bf16 *src = dy + (r * g.h + hk * group) * g.dh;
      convert(src, acc, g.dh);
      for (int64_t c = 1; c < group; ++c) {
        convert(src + c * g.dh, copy, g.dh);
        for (int64_t d = 0; d < g.dh; ++d)
          acc[d] += copy[d];
      }
      convert(acc, dx + (r * g.hkv + hk) * g.dh, g.dh);
    }
}

template <typename T> void runRepeatKvGradInput(const KernelArgs &args) {
  const Heads g(args, *args.outs[0].desc);
  const T *dy = dataOf<T>(args.ins[0]);
  T *dx = dataOf<T>(args.outs[0]);
  parallelFor(
      poolOf(args), g.rows, rowGrain(g.h * g.dh),
      [&](int64_t r0, int64_t r1) { sumCopiesRows(dy, g, r0, r1, dx); });
}

} // namespace

absl::Status registerRepeatKvKernels(KernelRegistry &registry) {
  return registerAll(registry,
                     {
                         {"repeat_kv", runRepeatKv},
                         {"repeat_kv_grad_input",
                          byStorage<runRepeatKvGradInput<float>,
                                    runRepeatKvGradInput<Bf16>>},
                     });
}

} // namespace braid::cpu
