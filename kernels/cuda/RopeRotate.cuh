// The RoPE rotation of rope / rope_grad_input (Rope.cu) and of the
// projection epilogue (FusedElementwise.cu): y = rotate(x, sign * a(pos, i))
// over [batch, seq, width], one thread per (position, pair index), the angle
// computed in double as the CPU computes it. Each pair is read before it is
// written, so y may be x (in place). Row r of the sequence dimension is at
// position map.at(r): r itself, or with `cp` its position in the whole
// sequence (SequenceLayout.h).
#pragma once

#include <cstdint>

#include "kernels/common/SequenceLayout.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda::rope {

// The positions of the `seq` rows of a launch's sequence dimension: this
// CP rank's part with the parameter `cp`, else the sequence itself. The CP
// coordinate is the same on every run of a rank's program, so it may be a
// launch argument even in a captured graph.
inline SequenceMap positionsOf(const KernelArgs &args, int64_t seq) {
  const bool cp = rows::paramsOf(args).intOr("cp", 0) != 0;
  if (!cp || args.ctx == nullptr)
    return SequenceMap::whole(seq);
  return SequenceMap::part(seq, args.ctx->cpRank, args.ctx->cpSize);
}

template <typename T>
__global__ void __launch_bounds__(rows::kBlock)
    rotateKernel(const T *x, T *y, int64_t batch, SequenceMap map,
                 int64_t width, int64_t half, double theta, float sign) {
  const int64_t seq = map.len, pairs = seq * half;
  for (int64_t t = blockIdx.x * int64_t{rows::kBlock} + threadIdx.x;
       t < pairs; t += int64_t{gridDim.x} * rows::kBlock) {
    const int64_t r = t / half, i = t - r * half;
    const double freq = pow(theta, -2.0 * static_cast<double>(i) /
                                       static_cast<double>(2 * half));
    const float a = static_cast<float>(static_cast<double>(map.at(r)) * freq);
    const float c = static_cast<float>(cos(static_cast<double>(a)));
    const float s = sign * static_cast<float>(sin(static_cast<double>(a)));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t row = (b * seq + r) * width;
      for (int64_t h0 = 0; h0 < width; h0 += 2 * half) {
        const int64_t ia = row + h0 + i, ib = ia + half;
        const float va = rows::load(x, ia), vb = rows::load(x, ib);
        rows::store(y, ia, va * c - vb * s);
        rows::store(y, ib, vb * c + va * s);
      }
    }
  }
}

} // namespace braid::cuda::rope
