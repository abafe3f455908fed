// repeat_kv and repeat_kv_grad_input on CUDA: grouped-query heads made
// explicit. Query head h reads kv head h / (H / Hkv); the gradient of a kv
// head is the sum of its H / Hkv copies, added in head order in f32 (as on
// the CPU) and stored once.
//
// With `tp_slice`, y holds this TP rank's H query heads of a model with
// `group` query heads per kv head and x all Hkv kv heads: local head h reads
// kv head (tpRank * H + h) / group, and the gradient of a kv head sums the
// local heads that read it (zero when none does), as on the CPU. Without it
// group = H / Hkv and the first local head is global head 0.
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::kBlock;
using rows::load;
using rows::store;

struct Heads {
  int64_t h, hkv, dh, rows;
  int64_t group; // query heads per kv head in the whole model
  int64_t head0; // the global index of local query head 0
};

// One thread per element of y [rows, H, Dh]: a copy of the storage bits, or
// zero for a kv head past Hkv (a TP coordinate the plan's sizes do not fit).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    repeatKvKernel(const T *__restrict__ x, T *__restrict__ y, int64_t n,
                   Heads g) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t d = i % g.dh, rh = i / g.dh;
    const int64_t h = rh % g.h, r = rh / g.h;
    const int64_t hk = (g.head0 + h) / g.group;
    y[i] = hk < g.hkv ? x[(r * g.hkv + hk) * g.dh + d] : T(0);
  }
}

// One thread per element of dx [rows, Hkv, Dh]: the local heads [first,
// last) that read the kv head, summed in head order.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    repeatKvGradKernel(const T *__restrict__ dy, T *__restrict__ dx, int64_t n,
                       Heads g) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t d = i % g.dh, rk = i / g.dh;
    const int64_t hk = rk % g.hkv, r = rk / g.hkv;
    const int64_t first = max(int64_t{0}, hk * g.group - g.head0);
    const int64_t last = min(g.h, (hk + 1) * g.group - g.head0);
    if (first >= last) {
      store(dx, i, 0.0f);
      continue;
    }
    const T *src = dy + (r * g.h + first) * g.dh + d;
    float acc = load(src, 0);
    for (int64_t c = 1; c < last - first; ++c)
      acc += load(src, c * g.dh);
    store(dx, i, acc);
  }
}

Heads headsOf(const KernelArgs &args, const TensorDesc &narrow) {
  const KernelParams &params = rows::paramsOf(args);
  Heads g;
  g.h = params.intOr("num_heads", 1);
  g.hkv = params.intOr("num_kv_heads", 1);
  g.rows = narrow.rows();
  g.dh = g.hkv > 0 ? narrow.lastDim() / g.hkv : 0;
  g.group = g.hkv > 0 ? g.h / g.hkv : 1;
  g.head0 = 0;
  // The TP coordinate is the same on every run: a launch argument even in a
  // captured graph.
  if (params.intOr("tp_slice", 0) != 0) {
    g.group = params.intOr("group", 1);
    g.head0 = args.ctx != nullptr ? args.ctx->tpRank * g.h : 0;
  }
  return g;
}

template <typename T> void runRepeatKv(const KernelArgs &args) {
  const Heads g = headsOf(args, *args.ins[0].desc);
  const int64_t n = g.rows * g.h * g.dh;
  if (n == 0)
    return;
  repeatKvKernel<T><<<rows::gridFor(n, kBlock * 4), kBlock, 0,
                      rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), n, g);
}

template <typename T> void runRepeatKvGradInput(const KernelArgs &args) {
  const Heads g = headsOf(args, *args.outs[0].desc);
  const int64_t n = g.rows * g.hkv * g.dh;
  if (n == 0)
    return;
  repeatKvGradKernel<T><<<rows::gridFor(n, kBlock * 4), kBlock, 0,
                          rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), n, g);
}

} // namespace

absl::Status registerRepeatKvKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"repeat_kv", byStorage<runRepeatKv<float>, runRepeatKv<Bf16>>},
          {"repeat_kv_grad_input",
           byStorage<runRepeatKvGradInput<float>, runRepeatKvGradInput<Bf16>>},
      });
}

} // namespace braid::cuda
