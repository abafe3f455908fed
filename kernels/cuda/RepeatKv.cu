// repeat_kv and repeat_kv_grad_input on CUDA: grouped-query heads made
// explicit. Query head h reads kv head h / (H / Hkv); the gradient of a kv
// head is the sum of its H / Hkv copies, added in head order in f32 (as on
// the CPU) and stored once.
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::kBlock;
using rows::load;
using rows::store;

// One thread per element of y [rows, H, Dh]: a copy of the storage bits.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    repeatKvKernel(const T *__restrict__ x, T *__restrict__ y, int64_t n,
                   int64_t heads, int64_t group, int64_t dh) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t d = i % dh, rh = i / dh;
    const int64_t h = rh % heads, r = rh / heads;
    const int64_t hkv = heads / group;
    y[i] = x[(r * hkv + h / group) * dh + d];
  }
}

// One thread per element of dx [rows, Hkv, Dh].
template <typename T>
__global__ void __launch_bounds__(kBlock)
    repeatKvGradKernel(const T *__restrict__ dy, T *__restrict__ dx, int64_t n,
                       int64_t hkv, int64_t group, int64_t dh) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const int64_t d = i % dh, rk = i / dh;
    const int64_t hk = rk % hkv, r = rk / hkv;
    const T *src = dy + (r * hkv * group + hk * group) * dh + d;
    float acc = load(src, 0);
    for (int64_t c = 1; c < group; ++c)
      acc += load(src, c * dh);
    store(dx, i, acc);
  }
}

struct Heads {
  int64_t h, hkv, dh, rows;
};

Heads headsOf(const KernelArgs &args, const TensorDesc &narrow) {
  const KernelParams &params = rows::paramsOf(args);
  Heads g;
  g.h = params.intOr("num_heads", 1);
  g.hkv = params.intOr("num_kv_heads", 1);
  g.rows = narrow.rows();
  g.dh = g.hkv > 0 ? narrow.lastDim() / g.hkv : 0;
  return g;
}

template <typename T> void runRepeatKv(const KernelArgs &args) {
  const Heads g = headsOf(args, *args.ins[0].desc);
  const int64_t n = g.rows * g.h * g.dh;
  if (n == 0)
    return;
  repeatKvKernel<T><<<rows::gridFor(n, kBlock * 4), kBlock, 0,
                      rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), n, g.h,
      g.h / g.hkv, g.dh);
}

template <typename T> void runRepeatKvGradInput(const KernelArgs &args) {
  const Heads g = headsOf(args, *args.outs[0].desc);
  const int64_t n = g.rows * g.hkv * g.dh;
  if (n == 0)
    return;
  repeatKvGradKernel<T><<<rows::gridFor(n, kBlock * 4), kBlock, 0,
                          rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), n, g.hkv,
      g.h / g.hkv, g.dh);
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
