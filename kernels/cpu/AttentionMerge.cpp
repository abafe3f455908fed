// attention_merge (docs/kernels.md, "Context parallel"): the online-softmax
// merge of two flash_attention results over disjoint sets of keys, as a
// ring of context-parallel steps produces them. With m = max(lse_a, lse_b),
//   lse = m + log(exp(lse_a - m) + exp(lse_b - m)),
//   o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b,
// in f32, o rounded once to its storage. A side that saw no key has lse
// -inf and weight exp(-inf) = 0; when neither did, lse = -inf and o = 0, as
// flash_attention gives such a row.
//
// Rows are independent: split over (batch, position) rows, the bits do not
// depend on the thread count.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// ins: o_a [B, S, H*Dh], lse_a [B, H, S], o_b, lse_b; outs: o, lse.
template <typename T> void runAttentionMerge(const KernelArgs &args) {
  const TensorDesc &od = *args.ins[0].desc;
  const int64_t b = od.shape[0], s = od.shape[1], width = od.shape[2];
  const int64_t h = paramsOf(args).intOr("num_heads", 1);
  const int64_t dh = h > 0 ? width / h : 0;
  const T *oa = dataOf<T>(args.ins[0]), *ob = dataOf<T>(args.ins[2]);
  const float *lseA = args.ins[1].f32(), *lseB = args.ins[3].f32();
  T *o = dataOf<T>(args.outs[0]);
  float *lse = args.outs[1].f32();
  parallelFor(
      poolOf(args), b * s, rowGrain(width), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t hi = 0; hi < h; ++hi) {
            const int64_t stat = ((r / s) * h + hi) * s + r % s;
            const int64_t off = r * width + hi * dh;
            const float la = lseA[stat], lb = lseB[stat];
            const float m = la > lb ? la : lb;
            if (m == kMinusInf) {
              lse[stat] = kMinusInf;
              zero(o + off, dh);
              continue;
            }
            const float l = m + std::log(expFloat(la - m) + expFloat(lb - m));
            const float ca = expFloat(la - l), cb = expFloat(lb - l);
            lse[stat] = l;
            for (int64_t d = 0; d < dh; ++d)
              store(o + off, d,
                    ca * load(oa + off, d) + cb * load(ob + off, d));
          }
      });
}

} // namespace

absl::Status registerAttentionMergeKernel(KernelRegistry &registry) {
  return registerAll(
      registry,
      {{"attention_merge",
        byStorage<runAttentionMerge<float>, runAttentionMerge<Bf16>>}});
}

} // namespace braid::cpu
