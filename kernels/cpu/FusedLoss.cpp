// The LM head fused with cross-entropy, and multi-tensor AdamW (docs/fusion.md).
//
// linear_cross_entropy, linear_cross_entropy_grad_input and
// linear_cross_entropy_grad_weight compute what linear + cross_entropy and
// cross_entropy_grad_input + linear_grad_input / linear_grad_weight compute,
// a chunk of logits at a time in scratch of `chunk` floats (at least one
// row or one vocabulary entry), so the [N, V] logits are never stored. The
// forward and the input gradient take chunks of rows of x; the weight
// gradient takes chunks of rows of W (vocabulary entries), each over all N
// rows, so that every dW element is one sgemm reduction over N exactly as
// linear_grad_weight forms it, and accumulates as it does (beta = 1).
//
// Per element the arithmetic is that of the unfused f32 kernels: logits and
// dlogits come from the same sgemm reductions and the same VecMath loops,
// and the loss is the same double sum in row order. With bf16 storage the
// kernels compute in f32 like every kernel (docs/kernels.md): x and W are
// widened, and only dx is rounded, once; the logits and dlogits, which the
// unfused bf16 kernels store as bf16, keep f32 here.
//
// multi_adamw is adamw over several tensors in one launch: the same
// coefficients (two sets: with and without weight decay) and the same
// element loop, so every bit matches the per-tensor launches.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/SharedLoops.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// --- LM head and cross-entropy -------------------------------------------

// Scratch held by the launching thread for the whole launch (the pool's
// threadScratch buffers are in use by chunk 0 of every parallelFor).
enum Slot { kWeight, kInput, kLogits, kOutput, kNumSlots };

float *launchScratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[kNumSlots];
  std::vector<float> &b = buffers[slot];
  if (b.size() < static_cast<size_t>(n))
    b.resize(n);
  return b.data();
}

constexpr int64_t kDefaultChunk = int64_t{1} << 20;

int64_t chunkOf(const KernelArgs &args) {
  return std::max<int64_t>(1, paramsOf(args).intOr("chunk", kDefaultChunk));
}

bool validLabel(int32_t label, int64_t v) { return label >= 0 && label < v; }

// `rows` x `cols` of src (leading dimension ld) as f32 with leading
// dimension `cols`: src itself when it is f32 and contiguous, else a widened
// copy in `slot`.
const float *asF32Matrix(ThreadPool *, const float *src, int64_t ld,
                         int64_t rows, int64_t cols, int slot) {
  if (ld == cols)
    return src;
  float *f = launchScratch(slot, rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(f + r * cols, src + r * ld, cols * sizeof(float));
  return f;
}
const float *asF32Matrix(ThreadPool *pool, const Bf16 *src, int64_t ld,
                         int64_t rows, int64_t cols, int slot) {
  float *f = launchScratch(slot, rows * cols);
  widenMatrix(pool, src, ld, rows, cols, f);
  return f;
}

// logits [rows, cols] = x [rows, d] w[cols, d]^T.
void logitsChunk(const float *x, const float *w, int64_t rows, int64_t cols,
                 int64_t d, float *logits) {
  if (d == 0)
    std::memset(logits, 0, rows * cols * sizeof(float));
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, d, 1.0f,
                x, d, w, d, 0.0f, logits, cols);
}

// lse of each of `rows` rows of `logits` [rows, v] (CrossEntropy.cpp).
BRAID_VECTOR_CLONES
void logSumExpRows(const float *logits, int64_t v, int64_t r0, int64_t r1,
                   float *e, float *lse) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *row = logits + r * v;
    const float m = maxOf(row, v);
    expShiftScale(row, m, 1.0f, e, v);
    lse[r] = m + std::log(sum(e, v));
  }
}

// d = factor * (exp(l - lse) - onehot(label - col0)) over the `cols`
// logits of one row that start at vocabulary entry col0 (CrossEntropy.cpp).
BRAID_VECTOR_CLONES
void dlogitsRow(const float *l, float lse, int32_t label, int64_t v,
                int64_t col0, int64_t cols, float factor, float *d) {
  expShiftScale(l, lse, factor, d, cols);
  if (validLabel(label, v) && label >= col0 && label < col0 + cols)
    d[label - col0] -= factor;
}

// The product of all dimensions but the last (Linear.cpp's rowsOf).
int64_t rowsOf(const TensorDesc &d) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < d.shape.size(); ++i)
    n *= d.shape[i];
  return n;
}

// The sizes of a launch, and W as f32.
struct Head {
  const float *w;  // [v, d]
  int64_t n, d, v;
};

template <typename T> Head headOf(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1];
  Head h;
  h.d = x.desc->lastDim();
  h.v = w.desc->shape[0];
  h.n = rowsOf(*x.desc);
  h.w = asF32Matrix(poolOf(args), dataOf<T>(w), h.d, h.v, h.d, kWeight);
  return h;
}

template <typename T> void runLinearCrossEntropy(const KernelArgs &args) {
  ThreadPool *pool = poolOf(args);
  const Head h = headOf<T>(args);
  const T *x = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[2].i32();
  float *lse = args.outs[1].f32();
  const int64_t chunkRows = std::max<int64_t>(1, chunkOf(args) / h.v);
  std::vector<float> target(h.n);
  for (int64_t r0 = 0; r0 < h.n; r0 += chunkRows) {
    const int64_t rows = std::min(chunkRows, h.n - r0);
    const float *xF = asF32Matrix(pool, x + r0 * h.d, h.d, rows, h.d, kInput);
    float *logits = launchScratch(kLogits, rows * h.v);
    logitsChunk(xF, h.w, rows, h.v, h.d, logits);
    parallelFor(pool, rows, rowGrain(h.v), [&](int64_t a, int64_t b) {
      float *e = threadScratch(0, h.v);
      logSumExpRows(logits, h.v, a, b, e, lse + r0);
    });
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t label = labels[r0 + r];
      target[r0 + r] = validLabel(label, h.v) ? logits[r * h.v + label] : 0.0f;
    }
  }
  double total = 0;
  for (int64_t r = 0; r < h.n; ++r)
    total += static_cast<double>(lse[r]) - static_cast<double>(target[r]);
  args.outs[0].f32()[0] =
      static_cast<float>(total / static_cast<double>(h.n));
}

float factorOf(const KernelArgs &args, int64_t rows) {
  return static_cast<float>(paramsOf(args).floatOr("scale", 1.0) /
                            static_cast<double>(rows));
}

template <typename T>
void runLinearCrossEntropyGradInput(const KernelArgs &args) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  ThreadPool *pool = poolOf(args);
  const Head h = headOf<T>(args);
  const T *x = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[2].i32();
  const float *lse = args.ins[3].f32();
  T *dx = dataOf<T>(args.outs[0]);
  const float factor = factorOf(args, h.n);
  if (h.d == 0)
    return;
  const int64_t chunkRows = std::max<int64_t>(1, chunkOf(args) / h.v);
  for (int64_t r0 = 0; r0 < h.n; r0 += chunkRows) {
    const int64_t rows = std::min(chunkRows, h.n - r0);
    const float *xF = asF32Matrix(pool, x + r0 * h.d, h.d, rows, h.d, kInput);
    float *logits = launchScratch(kLogits, rows * h.v);
    logitsChunk(xF, h.w, rows, h.v, h.d, logits);
    // Each row's dlogits replace its logits.
    parallelFor(pool, rows, rowGrain(h.v), [&](int64_t a, int64_t b) {
      float *d = threadScratch(0, h.v);
      for (int64_t r = a; r < b; ++r) {
        float *row = logits + r * h.v;
        dlogitsRow(row, lse[r0 + r], labels[r0 + r], h.v, 0, h.v, factor, d);
        std::memcpy(row, d, h.v * sizeof(float));
      }
    });
    float *out;
    if constexpr (kBf16)
      out = launchScratch(kOutput, rows * h.d);
    else
      out = dx + r0 * h.d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, h.d, h.v,
                1.0f, logits, h.v, h.w, h.d, 0.0f, out, h.d);
    if constexpr (kBf16)
      roundMatrix(pool, out, rows, h.d, dx + r0 * h.d, h.d);
  }
}

template <typename T, typename U>
void weightGradChunks(const KernelArgs &args, const Head &h, U *dw) {
  ThreadPool *pool = poolOf(args);
  const bool accumulate = accumulateOf(args);
  const int32_t *labels = args.ins[2].i32();
  const float *lse = args.ins[3].f32();
  const float factor = factorOf(args, h.n);
  if (h.d == 0)
    return;
  const float *xF =
      asF32Matrix(pool, dataOf<T>(args.ins[0]), h.d, h.n, h.d, kInput);
  const int64_t chunkCols = std::max<int64_t>(1, chunkOf(args) / h.n);
  for (int64_t c0 = 0; c0 < h.v; c0 += chunkCols) {
    const int64_t cols = std::min(chunkCols, h.v - c0);
    float *logits = launchScratch(kLogits, h.n * cols);
    logitsChunk(xF, h.w + c0 * h.d, h.n, cols, h.d, logits);
    parallelFor(pool, h.n, rowGrain(cols), [&](int64_t a, int64_t b) {
      float *d = threadScratch(0, cols);
      for (int64_t r = a; r < b; ++r) {
        float *row = logits + r * cols;
        dlogitsRow(row, lse[r], labels[r], h.v, c0, cols, factor, d);
        std::memcpy(row, d, cols * sizeof(float));
      }
    });
    U *dwRows = dw + c0 * h.d;
    float *out;
    if constexpr (std::is_same_v<U, float>) {
      out = dwRows;
    } else {
      out = launchScratch(kOutput, cols * h.d);
      if (accumulate)
        widenMatrix(pool, dwRows, h.d, cols, h.d, out);
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, h.d, h.n, 1.0f,
                logits, cols, xF, h.d, accumulate ? 1.0f : 0.0f, out, h.d);
    if constexpr (!std::is_same_v<U, float>)
      roundMatrix(pool, out, cols, h.d, dwRows, h.d);
  }
}

template <typename T>
void runLinearCrossEntropyGradWeight(const KernelArgs &args) {
  const Head h = headOf<T>(args);
  const TensorView &dw = args.outs[0];
  if (isBf16(dw))
    weightGradChunks<T>(args, h, dw.bf16());
  else
    weightGradChunks<T>(args, h, dw.f32());
}

// --- multi_adamw ---------------------------------------------------------

// As adamw (Optimizer.cpp): the same scalars and the same element loop
// (SharedLoops.h).
constexpr int64_t kAdamwBlock = 16384;

void runMultiAdamw(const KernelArgs &args) {
  const KernelParams &params = paramsOf(args);
  const KernelContext &ctx = contextOf(args);
  const int64_t n = static_cast<int64_t>(args.ins.size()) - 1;
  const int64_t decayed = params.intOr("decayed", 0);
  const double beta1 = params.floatOr("beta1", 0.9);
  const double beta2 = params.floatOr("beta2", 0.999);
  const double gradClip = params.floatOr("grad_clip", 0);
  const double t = static_cast<double>(std::max<int64_t>(1, ctx.step));
  const double norm = args.ins[n].f32()[0];

  AdamwCoefficients k;
  k.clip = static_cast<float>(
      gradClip > 0 ? std::min(1.0, gradClip / (norm + 1e-6)) : 1.0);
  k.b1 = static_cast<float>(beta1);
  k.c1 = static_cast<float>(1 - beta1);
  k.b2 = static_cast<float>(beta2);
  k.c2 = static_cast<float>(1 - beta2);
  k.bc2Sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
  k.stepSize = static_cast<float>(ctx.lr / (1 - std::pow(beta1, t)));
  k.eps = static_cast<float>(params.floatOr("eps", 1e-8));
  AdamwCoefficients withDecay = k, withoutDecay = k;
  withDecay.decay = static_cast<float>(
      1.0 - ctx.lr * params.floatOr("weight_decay", 0));
  withoutDecay.decay = static_cast<float>(1.0 - ctx.lr * 0.0);

  // Blocks of at most kAdamwBlock elements, tensors in order.
  std::vector<int64_t> firstBlock(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    firstBlock[i + 1] =
        firstBlock[i] + (args.ins[i].numel() + kAdamwBlock - 1) / kAdamwBlock;
  parallelFor(poolOf(args), firstBlock[n], 1, [&](int64_t b0, int64_t b1) {
    int64_t i = std::upper_bound(firstBlock.begin(), firstBlock.end(), b0) -
                firstBlock.begin() - 1;
    for (int64_t b = b0; b < b1; ++b) {
      while (b >= firstBlock[i + 1])
        ++i;
      const int64_t begin = (b - firstBlock[i]) * kAdamwBlock;
      const int64_t len =
          std::min(kAdamwBlock, args.ins[i].numel() - begin);
      adamwUpdate(i < decayed ? withDecay : withoutDecay,
                 args.ins[i].f32() + begin, args.outs[i].f32() + begin,
                 args.outs[n + i].f32() + begin,
                 args.outs[2 * n + i].f32() + begin, len);
    }
  });
}

} // namespace

absl::Status registerFusedLossKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"linear_cross_entropy", byStorage<runLinearCrossEntropy<float>,
                                             runLinearCrossEntropy<Bf16>>},
          {"linear_cross_entropy_grad_input",
           byStorage<runLinearCrossEntropyGradInput<float>,
                     runLinearCrossEntropyGradInput<Bf16>>},
          {"linear_cross_entropy_grad_weight",
           byStorage<runLinearCrossEntropyGradWeight<float>,
                     runLinearCrossEntropyGradWeight<Bf16>>},
          {"multi_adamw", runMultiAdamw},
      });
}

} // namespace braid::cpu
