// rope and rope_grad_input: rotary position embedding in Hugging Face's
// rotate-half layout. Pairs (i, i + Dh/2) of each head at position s turn by
// a = s * theta^(-2i/Dh); the angle is computed in double and rounded to
// float before cos and sin (docs/kernels.md). The gradient turns by -a.
// With `cp` the sequence dimension holds this CP rank's part of the
// sequence, and s is the position of a row in the whole
// (SequenceLayout.h).
//
// Work is split by position, so each chunk computes the cos/sin of its
// positions once and applies them to every batch row and head.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/SequenceLayout.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// Turns the pairs (i, i + half) of every head of the `rows` rows of `width`
// values at x (`stride` values apart) by the angles whose cosines and sines
// are cosA[i] and sinA[i].
template <typename T>
BRAID_INLINE void rotateRowsBody(const T *__restrict x, int64_t rows,
                                 int64_t stride, int64_t width, int64_t half,
                                 const float *__restrict cosA,
                                 const float *__restrict sinA,
                                 T *__restrict y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h0 = 0; h0 < width; h0 += 2 * half) {
      const T *xa = x + r * stride + h0, *xb = xa + half;
      T *ya = y + r * stride + h0, *yb = ya + half;
      for (int64_t i = 0; i < half; ++i) {
        const float a = load(xa, i), b = load(xb, i);
        store(ya, i, a * cosA[i] - b * sinA[i]);
        store(yb, i, b * cosA[i] + a * sinA[i]);
      }
    }
}

BRAID_VECTOR_CLONES
void rotateRows(const float *__restrict x, int64_t rows, int64_t stride,
                int64_t width, int64_t half, const float *__restrict cosA,
                const float *__restrict sinA, float *__restrict y) {
  rotateRowsBody(x, rows, stride, width, half, cosA, sinA, y);
}
BRAID_VECTOR_CLONES
void rotateRows(const Bf16 *__restrict x, int64_t rows, int64_t stride,
                int64_t width, int64_t half, const float *__restrict cosA,
                const float *__restrict sinA, Bf16 *__restrict y) {
  rotateRowsBody(x, rows, stride, width, half, cosA, sinA, y);
}

// Rows [s0, s1) of the sequence dimension of y = rotate(x, sign * a), for
// x [b, s, width] with heads of 2 * half values; row r is at position
// map.at(r).
template <typename T>
void rotatePositions(const T *x, int64_t b, int64_t s, int64_t width,
                     int64_t half, double theta, int sign,
                     const SequenceMap &map, int64_t s0, int64_t s1, T *y) {
  float *cosA = threadScratch(0, half);
  float *sinA = threadScratch(1, half);
  // The frequencies depend on i only: computed once per chunk rather than
  // once per position.
  thread_local std::vector<double> freq;
  freq.resize(half);
  for (int64_t i = 0; i < half; ++i)
    freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / (2 * half));
  for (int64_t r = s0; r < s1; ++r) {
    const double pos = static_cast<double>(map.at(r));
    for (int64_t i = 0; i < half; ++i) {
      const float a = static_cast<float>(pos * freq[i]);
      cosA[i] = std::cos(a);
      sinA[i] = sign * std::sin(a);
    }
    // Row r of every batch row: rows s * width floats apart.
    rotateRows(x + r * width, b, s * width, width, half, cosA, sinA,
               y + r * width);
  }
}

template <int kSign, typename T> void runRopeLaunch(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const T *x = dataOf<T>(args.ins[0]);
  T *y = dataOf<T>(args.outs[0]);
  const int64_t b = desc.shape[0], s = desc.shape[1], width = desc.shape[2];
  const int64_t h = paramsOf(args).intOr("num_heads", 1);
  const double theta = paramsOf(args).floatOr("theta", 10000.0);
  const int64_t half = width / h / 2;
  if (b == 0 || half == 0)
    return;
  const KernelContext &ctx = contextOf(args);
  const SequenceMap map = paramsOf(args).intOr("cp", 0) != 0
                              ? SequenceMap::part(s, ctx.cpRank, ctx.cpSize)
                              : SequenceMap::whole(s);
  parallelFor(
      poolOf(args), s, rowGrain(b * width), [&](int64_t s0, int64_t s1) {
        rotatePositions(x, b, s, width, half, theta, kSign, map, s0, s1, y);
      });
}

} // namespace

absl::Status registerRopeKernels(KernelRegistry &registry) {
  return registerAll(registry,
                     {
                         {"rope", byStorage<runRopeLaunch<1, float>,
                                            runRopeLaunch<1, Bf16>>},
                         {"rope_grad_input",
                          byStorage<runRopeLaunch<-1, float>,
                                    runRopeLaunch<-1, Bf16>>},
                     });
}

} // namespace braid::cpu
