// repeat_kv and repeat_kv_grad_input: grouped-query heads made explicit.
// Query head h reads kv head h / (H / Hkv); the gradient of a kv head is the
// sum of its H / Hkv copies, added in head order.
//
// With `tp_slice` (tensor parallelism with fewer kv heads than ranks, whose
// kv heads are replicated, as in Megatron) x holds all Hkv kv heads but y
// only this TP rank's H query heads, the whole model having `group` query
// heads per kv head: local head h is global head tpRank * H + h and reads
// kv head (tpRank * H + h) / group. The gradient then has x's whole width:
// each kv head gets the sum of the local heads that read it, in head order,
// and zero when none does, so that the ranks' gradients sum to the whole.
// Without tp_slice this is the same arithmetic with group = H / Hkv and
// global head = local head.
#include <algorithm>
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
  int64_t group; // query heads per kv head in the whole model
  int64_t head0; // the global index of local query head 0
  Heads(const KernelArgs &args, const TensorDesc &narrow) {
    const KernelParams &p = paramsOf(args);
    h = p.intOr("num_heads", 1);
    hkv = p.intOr("num_kv_heads", 1);
    rows = narrow.rows();
    dh = narrow.lastDim() / hkv;
    group = h / hkv;
    head0 = 0;
    if (p.intOr("tp_slice", 0) != 0) {
      group = p.intOr("group", 1);
      head0 = contextOf(args).tpRank * h;
    }
  }
  // The kv head local query head hi reads; hkv or more (none: a zero row)
  // only for a TP coordinate that the plan's sizes do not fit.
  int64_t kvHeadOf(int64_t hi) const { return (head0 + hi) / group; }
  // The local query heads [first, last) that read kv head hk (empty when
  // first >= last).
  int64_t firstReader(int64_t hk) const {
    return std::max<int64_t>(0, hk * group - head0);
  }
  int64_t lastReader(int64_t hk) const {
    return std::min<int64_t>(h, (hk + 1) * group - head0);
  }
};

// A copy of bits: the same for every storage type of `size` bytes.
void runRepeatKv(const KernelArgs &args) {
  const Heads g(args, *args.ins[0].desc);
  const int64_t size = dtypeSize(args.ins[0].desc->dtype);
  const char *x = static_cast<const char *>(args.ins[0].data);
  char *y = static_cast<char *>(args.outs[0].data);
  parallelFor(poolOf(args), g.rows, rowGrain(g.h * g.dh),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r)
                  for (int64_t hi = 0; hi < g.h; ++hi) {
                    char *out = y + (r * g.h + hi) * g.dh * size;
                    const int64_t hk = g.kvHeadOf(hi);
                    if (hk < g.hkv)
                      std::memcpy(out, x + (r * g.hkv + hk) * g.dh * size,
                                  g.dh * size);
                    else
                      std::memset(out, 0, g.dh * size);
                  }
              });
}

// Rows [r0, r1) of the gradient: each kv head is its first copy plus the
// others in head order (zero without readers).
BRAID_VECTOR_CLONES
void sumCopiesRows(const float *__restrict dy, Heads g, int64_t r0, int64_t r1,
                   float *__restrict dx) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t hk = 0; hk < g.hkv; ++hk) {
      float *out = dx + (r * g.hkv + hk) * g.dh;
      const int64_t first = g.firstReader(hk);
      const int64_t copies = g.lastReader(hk) - first;
      if (copies <= 0) {
        std::memset(out, 0, g.dh * sizeof(float));
        continue;
      }
      const float *src = dy + (r * g.h + first) * g.dh;
      std::memcpy(out, src, g.dh * sizeof(float));
      for (int64_t c = 1; c < copies; ++c)
        for (int64_t d = 0; d < g.dh; ++d)
          out[d] += src[c * g.dh + d];
    }
}

// bf16: the copies of one kv head are summed in f32 and rounded once.
void sumCopiesRows(const Bf16 *dy, Heads g, int64_t r0, int64_t r1, Bf16 *dx) {
  float *acc = threadScratch(0, g.dh), *copy = threadScratch(1, g.dh);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t hk = 0; hk < g.hkv; ++hk) {
      Bf16 *out = dx + (r * g.hkv + hk) * g.dh;
      const int64_t first = g.firstReader(hk);
      const int64_t copies = g.lastReader(hk) - first;
      if (copies <= 0) {
        zero(out, g.dh);
        continue;
      }
      const Bf16 *src = dy + (r * g.h + first) * g.dh;
      convert(src, acc, g.dh);
      for (int64_t c = 1; c < copies; ++c) {
        convert(src + c * g.dh, copy, g.dh);
        for (int64_t d = 0; d < g.dh; ++d)
          acc[d] += copy[d];
      }
      convert(acc, out, g.dh);
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
