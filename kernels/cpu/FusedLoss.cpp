// The LM head fused with cross-entropy, and multi-tensor AdamW (docs/fusion.md).
//
// linear_cross_entropy computes what linear + cross_entropy compute, and
// linear_cross_entropy_with_grad also what cross_entropy_grad_input +
// linear_grad_input + linear_grad_weight compute, a chunk of rows of x at a
// time, so the [N, V] logits are never stored: the forward holds a chunk of
// `chunk` logits (at least one row) in kernel scratch, the kernel with the
// gradient the R rows of its workspace output [R, V] (in the arena). Per
// chunk: the logits sgemm, then per row the log-sum-exp, the target logit
// and the dlogits (in place of the logits), then dx = dlogits W for the
// chunk's rows and dW += dlogits^T x over them (beta = 1 after the first
// chunk, and for the first too with `accumulate`).
//
// Per element the arithmetic is that of the unfused f32 kernels: logits and
// dlogits come from the same sgemm reductions and the same VecMath loops,
// and the loss is the same double sum in row order. With one chunk (all
// rows) dW is the one sgemm reduction over N that linear_grad_weight makes;
// with several chunks it is a sum of per-chunk reductions, equal up to f32
// rounding. With bf16 storage the kernels compute in f32 like every kernel
// (docs/kernels.md): x and W are widened, dx is rounded once, and a bf16 dW
// is summed over the chunks in f32 and rounded once; the logits and
// dlogits, which the unfused bf16 kernels store as bf16, keep f32 here.
//
// The vocabulary-parallel pair (docs/parallel.md, "Tensor parallel"): W is
// the TP rank's rows [tpRank * V, (tpRank + 1) * V) of the vocabulary.
// linear_cross_entropy_stats makes cross_entropy_stats' per-row statistics
// chunk by chunk; linear_cross_entropy_grad takes the whole vocabulary's lse
// (cross_entropy_combine) and computes each chunk's logits again, then its
// dlogits, dx and dW as the kernel with the gradient does.
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
enum Slot { kWeight, kInput, kLogits, kOutput, kWeightGrad, kNumSlots };

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

bool validLabel(int64_t label, int64_t v) { return label >= 0 && label < v; }

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

// d = factor * (exp(l - lse) - onehot(label)) over the v logits of one row
// (CrossEntropy.cpp); `label` counts from the row's first column.
BRAID_VECTOR_CLONES
void dlogitsRow(const float *l, float lse, int64_t label, int64_t v,
                float factor, float *d) {
  expShiftScale(l, lse, factor, d, v);
  if (validLabel(label, v))
    d[label] -= factor;
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

// The rows of x at a time that keep a chunk within `chunk` logits.
int64_t chunkRowsOf(const KernelArgs &args, const Head &h) {
  return std::max<int64_t>(1, chunkOf(args) / h.v);
}

// The f32 logits of rows [r0, r0 + rows) of x, written to `logits`, and
// those rows as f32.
struct LogitsChunk {
  const float *x;
  float *logits;
};
template <typename T>
LogitsChunk logitsOfRows(ThreadPool *pool, const Head &h, const T *x,
                         int64_t r0, int64_t rows, float *logits) {
  LogitsChunk c;
  c.x = asF32Matrix(pool, x + r0 * h.d, h.d, rows, h.d, kInput);
  c.logits = logits;
  logitsChunk(c.x, h.w, rows, h.v, h.d, c.logits);
  return c;
}

// The mean over rows of lse - target, summed in double in row order as
// cross_entropy sums it.
float meanLoss(const float *lse, const float *target, int64_t rows) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += static_cast<double>(lse[r]) - static_cast<double>(target[r]);
  return static_cast<float>(total / static_cast<double>(rows));
}

// fn(r0, rows, logits) for each chunk of rows of x in turn, the chunk's
// f32 logits in launch scratch (the forward kernels).
template <typename T, typename Fn>
void forEachLogitsChunk(const KernelArgs &args, const Head &h, Fn fn) {
  const int64_t chunkRows = chunkRowsOf(args, h);
  for (int64_t r0 = 0; r0 < h.n; r0 += chunkRows) {
    const int64_t rows = std::min(chunkRows, h.n - r0);
    fn(r0, rows,
       logitsOfRows(poolOf(args), h, dataOf<T>(args.ins[0]), r0, rows,
                    launchScratch(kLogits, rows * h.v))
           .logits);
  }
}

template <typename T> void runLinearCrossEntropy(const KernelArgs &args) {
  const Head h = headOf<T>(args);
  const int32_t *labels = args.ins[2].i32();
  float *lse = args.outs[1].f32();
  std::vector<float> target(h.n);
  forEachLogitsChunk<T>(args, h, [&](int64_t r0, int64_t rows,
                                     const float *logits) {
    parallelFor(poolOf(args), rows, rowGrain(h.v), [&](int64_t a, int64_t b) {
      float *e = threadScratch(0, h.v);
      logSumExpRows(logits, h.v, a, b, e, lse + r0);
    });
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t label = labels[r0 + r];
      target[r0 + r] = validLabel(label, h.v) ? logits[r * h.v + label] : 0.0f;
    }
  });
  args.outs[0].f32()[0] = meanLoss(lse, target.data(), h.n);
}

// cross_entropy_stats of x W^T, a chunk of rows at a time; W holds the
// vocabulary ids from tpRank * V.
template <typename T> void runLinearCrossEntropyStats(const KernelArgs &args) {
  const Head h = headOf<T>(args);
  const int32_t *labels = args.ins[2].i32();
  float *stats = args.outs[0].f32();
  const int64_t first = contextOf(args).tpRank * h.v;
  forEachLogitsChunk<T>(args, h, [&](int64_t r0, int64_t rows,
                                     const float *logits) {
    parallelFor(poolOf(args), rows, rowGrain(h.v), [&](int64_t a, int64_t b) {
      statsRows(logits, labels + r0, h.v, first, a, b, threadScratch(0, h.v),
                stats + 3 * r0);
    });
  });
}

float factorOf(const KernelArgs &args, int64_t rows) {
  return static_cast<float>(paramsOf(args).floatOr("scale", 1.0) /
                            static_cast<double>(rows));
}

// The head's backward for linear_cross_entropy_with_grad (lse == nullptr:
// each row's lse and target come from its logits, and the loss is written)
// and for linear_cross_entropy_grad (lse given, the whole vocabulary's; W's
// column 0 is vocabulary id `first`). `out` is the index of dx among the
// outputs, dW and the workspace following it.
template <typename T, typename U>
void headBackward(const KernelArgs &args, int out, U *dw,
                  const float *givenLse, int64_t first) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  ThreadPool *pool = poolOf(args);
  const Head h = headOf<T>(args);
  // The chunk's logits (then dlogits) live in the workspace output.
  float *workspace = args.outs[out + 2].f32();
  const int64_t chunkRows = args.outs[out + 2].desc->shape[0];
  const T *x = dataOf<T>(args.ins[0]);
  const int32_t *labels = args.ins[2].i32();
  T *dx = dataOf<T>(args.outs[out]);
  const bool accumulate = accumulateOf(args);
  const float factor = factorOf(args, h.n);
  // dW in f32 while the chunks add into it.
  float *dwF;
  if constexpr (std::is_same_v<U, float>) {
    dwF = dw;
  } else {
    dwF = launchScratch(kWeightGrad, h.v * h.d);
    if (accumulate)
      widenMatrix(pool, dw, h.d, h.v, h.d, dwF);
  }
  std::vector<float> ownLse(givenLse ? 0 : h.n), target(givenLse ? 0 : h.n);
  const float *lse = givenLse ? givenLse : ownLse.data();
  for (int64_t r0 = 0; r0 < h.n; r0 += chunkRows) {
    const int64_t rows = std::min(chunkRows, h.n - r0);
    const LogitsChunk c = logitsOfRows(pool, h, x, r0, rows, workspace);
    // Each row's statistics, then its dlogits in place of its logits.
    parallelFor(pool, rows, rowGrain(h.v), [&](int64_t a, int64_t b) {
      float *e = threadScratch(0, h.v);
      if (!givenLse)
        logSumExpRows(c.logits, h.v, a, b, e, ownLse.data() + r0);
      for (int64_t r = a; r < b; ++r) {
        float *row = c.logits + r * h.v;
        const int64_t label = int64_t{labels[r0 + r]} - first;
        if (!givenLse)
          target[r0 + r] = validLabel(label, h.v) ? row[label] : 0.0f;
        dlogitsRow(row, lse[r0 + r], label, h.v, factor, e);
        std::memcpy(row, e, h.v * sizeof(float));
      }
    });
    if (h.d == 0)
      continue;
    float *dxF;
    if constexpr (kBf16)
      dxF = launchScratch(kOutput, rows * h.d);
    else
      dxF = dx + r0 * h.d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, h.d, h.v,
                1.0f, c.logits, h.v, h.w, h.d, 0.0f, dxF, h.d);
    if constexpr (kBf16)
      roundMatrix(pool, dxF, rows, h.d, dx + r0 * h.d, h.d);
    const bool add = accumulate || r0 > 0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h.v, h.d, rows, 1.0f,
                c.logits, h.v, c.x, h.d, add ? 1.0f : 0.0f, dwF, h.d);
  }
  if constexpr (!std::is_same_v<U, float>)
    if (h.d > 0)
      roundMatrix(pool, dwF, h.v, h.d, dw, h.d);
  if (!givenLse)
    args.outs[0].f32()[0] = meanLoss(lse, target.data(), h.n);
}

template <typename T>
void headBackward(const KernelArgs &args, int out, const float *givenLse,
                  int64_t first) {
  const TensorView &dw = args.outs[out + 1];
  if (isBf16(dw))
    headBackward<T>(args, out, dw.bf16(), givenLse, first);
  else
    headBackward<T>(args, out, dw.f32(), givenLse, first);
}

template <typename T>
void runLinearCrossEntropyWithGrad(const KernelArgs &args) {
  headBackward<T>(args, 1, nullptr, 0);
}

template <typename T> void runLinearCrossEntropyGrad(const KernelArgs &args) {
  headBackward<T>(args, 0, args.ins[3].f32(),
                  contextOf(args).tpRank * args.ins[1].desc->shape[0]);
}

// --- multi_adamw ---------------------------------------------------------

// As adamw (Optimizer.cpp): the same scalars and the same element loop
// (SharedLoops.h).
constexpr int64_t kAdamwBlock = 16384;

void runMultiAdamw(const KernelArgs &args) {
  const KernelParams &params = paramsOf(args);
  const KernelContext &ctx = contextOf(args);
  const int64_t n = static_cast<int64_t>(args.ins.size()) - 2;
  if (args.ins[n + 1].f32()[0] != 0)
    return; // a non-finite step (step_guard): nothing changes
  const int64_t decayed = params.intOr("decayed", 0);
  const double beta1 = params.floatOr("beta1", 0.9);
  const double beta2 = params.floatOr("beta2", 0.999);
  const double gradClip = params.floatOr("grad_clip", 0);
  const double t = static_cast<double>(std::max<int64_t>(1, ctx.update));
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
          {"linear_cross_entropy_with_grad",
           byStorage<runLinearCrossEntropyWithGrad<float>,
                     runLinearCrossEntropyWithGrad<Bf16>>},
          {"linear_cross_entropy_stats",
           byStorage<runLinearCrossEntropyStats<float>,
                     runLinearCrossEntropyStats<Bf16>>},
          {"linear_cross_entropy_grad",
           byStorage<runLinearCrossEntropyGrad<float>,
                     runLinearCrossEntropyGrad<Bf16>>},
          {"multi_adamw", runMultiAdamw},
      });
}

} // namespace braid::cpu
