// attention_merge on CUDA (docs/kernels.md, "Context parallel"): the
// online-softmax merge of two flash_attention results over disjoint keys,
// as kernels/cpu/AttentionMerge.cpp computes it. With m = max(lse_a,
// lse_b): lse = m + log(exp(lse_a - m) + exp(lse_b - m)) and o =
// exp(lse_a - lse) o_a + exp(lse_b - lse) o_b in f32; lse = -inf and o = 0
// when neither side saw a key.
//
// One thread per element of o, grid-stride: each computes its row's
// weights from the two lse values (a few operations, no shared state), and
// the thread of the row's first element writes lse. exp is ExpFloat.h's,
// the CPU's; log is logf, which may differ from the CPU's in the last bit.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/ExpFloat.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::kBlock;
using rows::load;
using rows::store;

template <typename T>
__global__ void __launch_bounds__(kBlock)
    mergeKernel(const T *__restrict__ oa, const float *__restrict__ lseA,
                const T *__restrict__ ob, const float *__restrict__ lseB,
                T *__restrict__ o, float *__restrict__ lse, int64_t seq,
                int64_t heads, int64_t dh, int64_t total) {
  const int64_t width = heads * dh;
  for (int64_t t = blockIdx.x * int64_t{kBlock} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * kBlock) {
    const int64_t r = t / width, c = t - r * width, hi = c / dh;
    const int64_t stat = ((r / seq) * heads + hi) * seq + r % seq;
    const float la = lseA[stat], lb = lseB[stat];
    const float m = la > lb ? la : lb;
    if (m == -INFINITY) {
      store(o, t, 0.0f);
      if (c % dh == 0)
        lse[stat] = -INFINITY;
      continue;
    }
    const float l =
        m + logf(expf32::expFloat(la - m) + expf32::expFloat(lb - m));
    const float ca = expf32::expFloat(la - l), cb = expf32::expFloat(lb - l);
    // Separate roundings, as the CPU's: no fused multiply-add.
    store(o, t,
          expf32::add(expf32::mul(ca, load(oa, t)),
                      expf32::mul(cb, load(ob, t))));
    if (c % dh == 0)
      lse[stat] = l;
  }
}

template <typename T> void runAttentionMerge(const KernelArgs &args) {
  const TensorDesc &od = *args.ins[0].desc;
  const int64_t seq = od.shape[1];
  const int64_t heads = rows::paramsOf(args).intOr("num_heads", 1);
  const int64_t dh = heads > 0 ? od.shape[2] / heads : 0;
  const int64_t total = od.numel();
  if (total == 0 || dh == 0)
    return;
  mergeKernel<T>
      <<<rows::gridFor(total, kBlock), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), args.ins[1].f32(),
          rows::dataOf<T>(args.ins[2]), args.ins[3].f32(),
          rows::dataOf<T>(args.outs[0]), args.outs[1].f32(), seq, heads, dh,
          total);
}

} // namespace

absl::Status registerAttentionMergeKernel(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {{"attention_merge",
        byStorage<runAttentionMerge<float>, runAttentionMerge<Bf16>>}});
}

} // namespace braid::cuda
