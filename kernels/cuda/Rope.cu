// rope and rope_grad_input on CUDA: rotary position embedding in Hugging
// Face's rotate-half layout (docs/kernels.md). Pair (i, i + Dh/2) of every
// head at position s turns by a = s * theta^(-2i/Dh), the angle computed in
// double and rounded to float; the gradient turns by -a.
//
// One thread per (position, pair index i): it computes the angle's cosine
// and sine once and applies them to every batch row and head. cos and sin
// of the float angle are evaluated in double and rounded once, which gives
// the correctly rounded float values the CPU's cosf and sinf return in
// practically every case. With `cp`, s is the position of the row in the
// whole sequence (RopeRotate.cuh).
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RopeRotate.cuh"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::kBlock;
using rows::load;
using rows::store;

template <int kSign, typename T> void runRope(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t batch = desc.shape[0], seq = desc.shape[1],
                width = desc.shape[2];
  const KernelParams &params = rows::paramsOf(args);
  const int64_t heads = params.intOr("num_heads", 1);
  const double theta = params.floatOr("theta", 10000.0);
  const int64_t half = heads > 0 ? width / heads / 2 : 0;
  if (batch == 0 || seq == 0 || half == 0)
    return;
  rope::rotateKernel<T>
      <<<rows::gridFor(seq * half, kBlock), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.outs[0]), batch,
          rope::positionsOf(args, seq), width, half, theta,
          static_cast<float>(kSign));
}

} // namespace

absl::Status registerRopeKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"rope", byStorage<runRope<1, float>, runRope<1, Bf16>>},
          {"rope_grad_input", byStorage<runRope<-1, float>, runRope<-1, Bf16>>},
      });
}

} // namespace braid::cuda
