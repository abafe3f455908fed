// cast: f32 -> bf16 (round to nearest even, NaN stays NaN), bf16 -> f32
// (exact), or a copy when both sides have the same dtype; and the matrix
// conversions the GEMMs use for bf16 operands. Every element is
// independent, so work is split over flat ranges (rows for matrices) and
// nothing depends on the thread count.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {

namespace {

constexpr int64_t kElementGrain = 16384;

BRAID_VECTOR_CLONES
void widenLoop(const Bf16 *__restrict src, float *__restrict dst, int64_t n) {
  convert(src, dst, n);
}

BRAID_VECTOR_CLONES
void roundLoop(const float *__restrict src, Bf16 *__restrict dst, int64_t n) {
  convert(src, dst, n);
}

void runCast(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const int64_t n = x.numel();
  const DType from = x.desc->dtype, to = y.desc->dtype;
  parallelFor(poolOf(args), n, kElementGrain, [&](int64_t b, int64_t e) {
    if (from == to) {
      const int64_t size = dtypeSize(from);
      std::memcpy(static_cast<char *>(y.data) + b * size,
                  static_cast<const char *>(x.data) + b * size,
                  (e - b) * size);
    } else if (from == DType::kBF16) {
      widenLoop(x.bf16() + b, y.f32() + b, e - b);
    } else {
      roundLoop(x.f32() + b, y.bf16() + b, e - b);
    }
  });
}

} // namespace

void widenMatrix(ThreadPool *pool, const Bf16 *src, int64_t ld, int64_t rows,
                 int64_t cols, float *dst) {
  parallelFor(pool, rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      widenLoop(src + r * ld, dst + r * cols, cols);
  });
}

void roundMatrix(ThreadPool *pool, const float *src, int64_t rows,
                 int64_t cols, Bf16 *dst, int64_t ld) {
  parallelFor(pool, rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      roundLoop(src + r * cols, dst + r * ld, cols);
  });
}

absl::Status registerCastKernel(KernelRegistry &registry) {
  return registerAll(registry, {{"cast", runCast}});
}

} // namespace braid::cpu
