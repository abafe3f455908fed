// linear, linear_grad_input, linear_grad_weight: y = x w^T + b and its
// gradients, on OpenBLAS's sgemm; moe_grouped_linear, moe_batched_linear
// and their gradients: the same per expert over each expert's block of
// rows (grouped: blocks at the offsets; batched: E equal blocks).
//
// OpenBLAS runs its own threads, so sgemm is called from the launching
// thread only; the pool is used for the bias work and the conversions
// around it. bf16 operands are widened to f32 scratch and bf16 results
// computed in f32 scratch, then rounded: sgemm accumulates in f32 either
// way. The scratch is bounded by cutting the GEMM into panels of output
// rows (columns of dw), each computed by sgemm over the whole reduction, so
// every element is summed as one f32 GEMM would sum it. f32 launches make
// the single sgemm call they always made. The grouped weight gradient
// computes each block's product on its own and adds the products in block
// order (groupedWeightGrad), so that replicated experts sum exactly.
#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/common/MoePermute.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"

namespace braid::cpu {
namespace {

// OpenBLAS's worker threads busy-wait for about 2^28 cycles after each GEMM
// before they sleep. Between GEMMs every other kernel runs on our own
// threads, which those spinning workers would halve (measured: a small-Llama
// step took 198 ms instead of 150). 2^4 cycles makes them sleep at once.
// OpenBLAS reads the variable in its own load-time constructor, so this one
// must run first (priority 101 precedes default-priority constructors). A
// value the user set is kept.
__attribute__((constructor(101))) void shortenBlasThreadSpin() {
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
}

// The product of all dimensions but the last. Unlike TensorDesc::rows this
// is not 0 when the last dimension is: x [3, 0] still has 3 rows of y.
int64_t rowsOf(const TensorDesc &d) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < d.shape.size(); ++i)
    n *= d.shape[i];
  return n;
}

// The floats one panel buffer of a bf16 GEMM may hold (4 MiB).
constexpr int64_t kPanelFloats = int64_t{1} << 20;

// Panel rows when each row needs `floatsPerRow` floats of scratch.
int64_t panelRows(int64_t floatsPerRow) {
  return std::max<int64_t>(1, kPanelFloats / std::max<int64_t>(1, floatsPerRow));
}

// Scratch slots of one launch; the grouped weight gradient's per-block
// products and per-expert sums have their own.
enum Slot {
  kWholeOperand,
  kInPanel,
  kOutPanel,
  kBias,
  kBlockProduct,
  kExpertSum,
  kSlots
};

// Scratch for widened operands and f32 results, held by the launching
// thread for the whole launch. threadScratch would not do: chunk 0 of every
// parallelFor runs on this thread and uses it meanwhile.
float *gemmScratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[kSlots];
  std::vector<float> &b = buffers[slot];
  if (b.size() < static_cast<size_t>(n))
    b.resize(n);
  return b.data();
}

// A matrix as sgemm reads it.
struct InPanel {
  const float *data;
  int64_t ld;
};
// A matrix as sgemm writes it.
struct OutPanel {
  float *data;
  int64_t ld;
};

// `rows` x `cols` of the matrix at src (leading dimension ld) as f32: src
// itself, or a widened copy in scratch `slot`.
InPanel readPanel(ThreadPool *, const float *src, int64_t ld, int64_t,
                  int64_t, int) {
  return {src, ld};
}
InPanel readPanel(ThreadPool *pool, const Bf16 *src, int64_t ld, int64_t rows,
                  int64_t cols, int slot) {
  float *f = gemmScratch(slot, rows * cols);
  widenMatrix(pool, src, ld, rows, cols, f);
  return {f, cols};
}

// Where sgemm writes `rows` x `cols` of the matrix at dst: dst itself, or
// f32 scratch in `slot` that holds the widened old values when the GEMM
// adds into them (`keepOld`) and that flushPanel rounds into dst.
OutPanel writePanel(ThreadPool *, float *dst, int64_t ld, int64_t, int64_t,
                    bool, int) {
  return {dst, ld};
}
OutPanel writePanel(ThreadPool *pool, Bf16 *dst, int64_t ld, int64_t rows,
                    int64_t cols, bool keepOld, int slot) {
  float *f = gemmScratch(slot, rows * cols);
  if (keepOld)
    widenMatrix(pool, dst, ld, rows, cols, f);
  return {f, cols};
}
void flushPanel(ThreadPool *, OutPanel, float *, int64_t, int64_t, int64_t) {}
void flushPanel(ThreadPool *pool, OutPanel p, Bf16 *dst, int64_t ld,
                int64_t rows, int64_t cols) {
  roundMatrix(pool, p.data, rows, cols, dst, ld);
}

// Fills each of `rows` rows of y (length m) with b, or with zeros.
template <typename T>
void fillRows(ThreadPool *pool, T *y, const T *b, int64_t rows, int64_t m) {
  parallelFor(pool, rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (b)
        convert(b, y + r * m, m);
      else
        zero(y + r * m, m);
    }
  });
}

// y [n, m] = x [n, k] w^T (+ b): the rows of one linear, or of one
// expert's block of a grouped one.
template <typename T>
void linearRows(ThreadPool *pool, const T *x, const T *w, const T *bias,
                T *y, int64_t n, int64_t m, int64_t k) {
  if (n == 0 || m == 0)
    return;
  const InPanel wF = readPanel(pool, w, k, m, k, kWholeOperand);
  const InPanel bF =
      bias ? readPanel(pool, bias, m, 1, m, kBias) : InPanel{nullptr, 0};
  const int64_t panel = std::is_same_v<T, float> ? n : panelRows(k + m);
  for (int64_t r0 = 0; r0 < n; r0 += panel) {
    const int64_t rows = std::min(panel, n - r0);
    T *yRows = y + r0 * m;
    const OutPanel yF = writePanel(pool, yRows, m, rows, m, false, kOutPanel);
    // With a bias, y starts as the bias rows and sgemm adds into it (beta 1).
    if (bias || k == 0)
      fillRows(pool, yF.data, bF.data, rows, m);
    if (k > 0) {
      const InPanel xF = readPanel(pool, x + r0 * k, k, rows, k, kInPanel);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, m, k, 1.0f,
                  xF.data, xF.ld, wF.data, wF.ld, bias ? 1.0f : 0.0f, yF.data,
                  yF.ld);
    }
    flushPanel(pool, yF, yRows, m, rows, m);
  }
}

template <typename T> void runLinear(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1], &y = args.outs[0];
  // A row-parallel linear's partial sum holds its bias on TP rank 0 only.
  const bool partialBias = paramsOf(args).intOr("partial_bias", 0) != 0 &&
                           contextOf(args).tpRank != 0;
  const T *bias = args.ins.size() == 3 && !partialBias
                      ? dataOf<T>(args.ins[2])
                      : nullptr;
  linearRows(poolOf(args), dataOf<T>(x), dataOf<T>(w), bias, dataOf<T>(y),
             rowsOf(*x.desc), w.desc->shape[0], x.desc->lastDim());
}

// dx [n, k] (+)= dy [n, m] w: the rows of one linear, or of one expert's
// block of a grouped one.
template <typename T>
void gradInputRows(ThreadPool *pool, const T *dy, const T *w, T *dx,
                   int64_t n, int64_t m, int64_t k, bool accumulate) {
  if (n == 0 || k == 0)
    return;
  if (m == 0) {
    if (!accumulate)
      fillRows<T>(pool, dx, nullptr, n, k);
    return;
  }
  const InPanel wF = readPanel(pool, w, k, m, k, kWholeOperand);
  const int64_t panel = std::is_same_v<T, float> ? n : panelRows(m + k);
  for (int64_t r0 = 0; r0 < n; r0 += panel) {
    const int64_t rows = std::min(panel, n - r0);
    T *dxRows = dx + r0 * k;
    const InPanel dyF = readPanel(pool, dy + r0 * m, m, rows, m, kInPanel);
    const OutPanel dxF =
        writePanel(pool, dxRows, k, rows, k, accumulate, kOutPanel);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, k, m, 1.0f,
                dyF.data, dyF.ld, wF.data, wF.ld, accumulate ? 1.0f : 0.0f,
                dxF.data, dxF.ld);
    flushPanel(pool, dxF, dxRows, k, rows, k);
  }
}

template <typename T> void runLinearGradInput(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &w = args.ins[1], &dx = args.outs[0];
  gradInputRows(poolOf(args), dataOf<T>(dy), dataOf<T>(w), dataOf<T>(dx),
                rowsOf(*dy.desc), dy.desc->lastDim(), w.desc->shape[1],
                accumulateOf(args));
}

// db[m] (+)= sum over rows of dy[r, m]. Each chunk owns a range of columns
// and adds rows in order, so the bits do not depend on the thread count.
template <typename T, typename U>
void biasGrad(ThreadPool *pool, const T *dy, U *db, int64_t rows, int64_t m,
              bool accumulate) {
  parallelFor(pool, m, 64, [&](int64_t c0, int64_t c1) {
    const int64_t width = c1 - c0;
    float *acc = threadScratch(0, width);
    std::memset(acc, 0, width * sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      const T *__restrict src = dy + r * m + c0;
      for (int64_t j = 0; j < width; ++j)
        acc[j] += load(src, j);
    }
    for (int64_t j = 0; j < width; ++j)
      store(db, c0 + j,
            accumulate ? load(db, c0 + j) + acc[j] : acc[j]);
  });
}

// dw (+)= dy^T x, with dy and x of storage type T and dw of U (f32, or T).
template <typename T, typename U>
void weightGrad(ThreadPool *pool, const T *dy, const T *x, U *dw, int64_t n,
                int64_t m, int64_t k, bool accumulate) {
  if (n == 0) {
    if (!accumulate)
      fillRows<U>(pool, dw, nullptr, m, k);
    return;
  }
  const InPanel xF = readPanel(pool, x, k, n, k, kWholeOperand);
  // Panels of dw rows, that is of dy columns.
  const bool f32 = std::is_same_v<T, float> && std::is_same_v<U, float>;
  const int64_t panel = f32 ? m : panelRows(n + k);
  for (int64_t m0 = 0; m0 < m; m0 += panel) {
    const int64_t cols = std::min(panel, m - m0);
    const InPanel dyF = readPanel(pool, dy + m0, m, n, cols, kInPanel);
    const OutPanel dwF =
        writePanel(pool, dw + m0 * k, k, cols, k, accumulate, kOutPanel);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, k, n, 1.0f,
                dyF.data, dyF.ld, xF.data, xF.ld, accumulate ? 1.0f : 0.0f,
                dwF.data, dwF.ld);
    flushPanel(pool, dwF, dw + m0 * k, k, cols, k);
  }
}

// The weight and bias gradients may each be f32 over bf16 inputs.
template <typename T> void runLinearGradWeight(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &x = args.ins[1], &dw = args.outs[0];
  const bool accumulate = accumulateOf(args);
  const int64_t n = rowsOf(*dy.desc), m = dy.desc->lastDim();
  const int64_t k = x.desc->lastDim();
  ThreadPool *pool = poolOf(args);
  const T *dyT = dataOf<T>(dy);
  if (m == 0)
    return;
  if (args.outs.size() == 2) {
    const TensorView &db = args.outs[1];
    if (isBf16(db))
      biasGrad(pool, dyT, db.bf16(), n, m, accumulate);
    else
      biasGrad(pool, dyT, db.f32(), n, m, accumulate);
  }
  if (k == 0)
    return;
  if (isBf16(dw))
    weightGrad(pool, dyT, dataOf<T>(x), dw.bf16(), n, m, k, accumulate);
  else
    weightGrad(pool, dyT, dataOf<T>(x), dw.f32(), n, m, k, accumulate);
}

// The grouped linears of a mixture-of-experts layer: rows [offsets[g],
// offsets[g + 1]) of x are block g and go through expert g mod E's weight
// w[g mod E] [M, K] (E the weight's leading dimension): one block per
// expert on one rank; under expert parallel, one per sending rank and
// local expert, rank by rank, as the tokens arrive. Each block is one
// linear of the kernels above, so it sums as they do. Offsets come from
// moe_permute or moe_ep_offsets; they are clamped to the rows there are,
// so a corrupted one cannot reach outside them. Rows from the last offset
// on (unrouted choices, rows left free) are zero in y and dx. The batched
// linears of capacity mode are the same over E equal blocks of rows (each
// expert's slots, padding included), every row computed.
struct ExpertBlocks {
  const int32_t *offsets; // null: E equal blocks
  int64_t blocks, experts, rows;

  int64_t begin(int64_t g) const {
    if (!offsets)
      return g * (rows / blocks);
    return std::clamp<int64_t>(offsets[g], 0, rows);
  }
  int64_t end(int64_t g) const {
    if (!offsets)
      return (g + 1) * (rows / blocks);
    return std::clamp<int64_t>(offsets[g + 1], begin(g), rows);
  }
};

// The blocks of a launch: at the offsets (input 2) when it has them, else
// E equal ones, E the leading dimension of `weight`.
ExpertBlocks blocksOf(const KernelArgs &args, const TensorView &rowsView,
                      const TensorView &weight) {
  const int64_t experts = weight.desc->shape[0];
  if (args.ins.size() > 2) {
    const TensorView &o = args.ins[2];
    return {o.i32(), o.desc->shape[0] - 1, experts, rowsOf(*rowsView.desc)};
  }
  return {nullptr, experts, experts, rowsOf(*rowsView.desc)};
}

template <typename T>
void zeroTail(ThreadPool *pool, const ExpertBlocks &b, T *y, int64_t width) {
  const int64_t used = b.blocks == 0 ? 0 : b.end(b.blocks - 1);
  fillRows<T>(pool, y + used * width, nullptr, b.rows - used, width);
}

// Adaptive recompute's clone in the backward (`recompute_above`, docs/moe.md)
// computes only when the rank received more rows than the forward kept;
// otherwise moe_restore_rows fills its output from the kept rows.
bool keptInstead(const KernelArgs &args, const ExpertBlocks &b) {
  const int64_t above = paramsOf(args).intOr("recompute_above", -1);
  return above >= 0 && b.offsets &&
         moe::receivedRows(b.offsets, b.blocks, b.rows) <= above;
}

template <typename T> void runGroupedLinear(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1], &y = args.outs[0];
  const ExpertBlocks b = blocksOf(args, x, w);
  if (keptInstead(args, b))
    return;
  const int64_t m = w.desc->shape[1], k = w.desc->shape[2];
  ThreadPool *pool = poolOf(args);
  for (int64_t g = 0; g < b.blocks; ++g)
    linearRows(pool, dataOf<T>(x) + b.begin(g) * k,
               dataOf<T>(w) + g % b.experts * m * k,
               static_cast<const T *>(nullptr), dataOf<T>(y) + b.begin(g) * m,
               b.end(g) - b.begin(g), m, k);
  zeroTail(pool, b, dataOf<T>(y), m);
}

template <typename T> void runGroupedLinearGradInput(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &w = args.ins[1], &dx = args.outs[0];
  const ExpertBlocks b = blocksOf(args, dy, w);
  const int64_t m = w.desc->shape[1], k = w.desc->shape[2];
  const bool accumulate = accumulateOf(args);
  ThreadPool *pool = poolOf(args);
  for (int64_t g = 0; g < b.blocks; ++g)
    gradInputRows(pool, dataOf<T>(dy) + b.begin(g) * m,
                  dataOf<T>(w) + g % b.experts * m * k,
                  dataOf<T>(dx) + b.begin(g) * k, b.end(g) - b.begin(g), m, k,
                  accumulate);
  if (!accumulate)
    zeroTail(pool, b, dataOf<T>(dx), k);
}

// dw[e] (+)= Q_e, the sum over e's non-empty blocks, in block order, of
// P_g = dy[block g]^T x[block g]. Each P_g is one sgemm of its own (beta 0,
// f32) and the P_g are added in f32 in element order: Q_e = P_first, then
// Q_e += P_g. So a P_g computed by a launch of that block alone (a hot
// expert's replica on another rank, docs/moe.md) and added in block order
// gives these bits exactly, which a GEMM accumulating with beta 1 would
// not (its blocking of the reduction depends on the rows). Then dw[e] = Q_e,
// or dw[e] + Q_e with `accumulate`, rounded once when dw is bf16; an expert
// without rows gets zeros (or keeps dw).
template <typename T, typename U>
void groupedWeightGrad(const KernelArgs &args, U *dw) {
  const TensorView &dy = args.ins[0], &x = args.ins[1];
  const ExpertBlocks b = blocksOf(args, dy, args.outs[0]);
  const int64_t m = dy.desc->lastDim(), k = x.desc->lastDim();
  const bool accumulate = accumulateOf(args);
  ThreadPool *pool = poolOf(args);
  const int64_t size = m * k;
  if (size == 0)
    return;
  for (int64_t e = 0; e < b.experts; ++e) {
    U *dwE = dw + e * size;
    // Q_e lives in dw[e] itself when that is f32 and nothing else is
    // added to it.
    bool inPlace = false;
    float *q = nullptr;
    if constexpr (std::is_same_v<U, float>) {
      inPlace = !accumulate;
      q = inPlace ? dwE : nullptr;
    }
    if (!q)
      q = gemmScratch(kExpertSum, size);
    bool any = false;
    for (int64_t g = e; g < b.blocks; g += b.experts) {
      const int64_t n = b.end(g) - b.begin(g);
      if (n == 0)
        continue;
      float *p = any ? gemmScratch(kBlockProduct, size) : q;
      weightGrad(pool, dataOf<T>(dy) + b.begin(g) * m,
                 dataOf<T>(x) + b.begin(g) * k, p, n, m, k, false);
      if (any)
        parallelFor(pool, size, 16384, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            q[i] += p[i];
        });
      any = true;
    }
    if (!any) {
      if (!accumulate)
        zero(dwE, size);
      continue;
    }
    if (inPlace)
      continue;
    parallelFor(pool, size, 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        store(dwE, i, accumulate ? load(dwE, i) + q[i] : q[i]);
    });
  }
}

template <typename T> void runGroupedLinearGradWeight(const KernelArgs &args) {
  const TensorView &dw = args.outs[0];
  if (isBf16(dw))
    groupedWeightGrad<T>(args, dw.bf16());
  else
    groupedWeightGrad<T>(args, dw.f32());
}

} // namespace

absl::Status registerLinearKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"linear", byStorage<runLinear<float>, runLinear<Bf16>>},
          {"linear_grad_input",
           byStorage<runLinearGradInput<float>, runLinearGradInput<Bf16>>},
          {"linear_grad_weight",
           byStorage<runLinearGradWeight<float>, runLinearGradWeight<Bf16>>},
          {"moe_grouped_linear",
           byStorage<runGroupedLinear<float>, runGroupedLinear<Bf16>>},
          {"moe_grouped_linear_grad_input",
           byStorage<runGroupedLinearGradInput<float>,
                     runGroupedLinearGradInput<Bf16>>},
          {"moe_grouped_linear_grad_weight",
           byStorage<runGroupedLinearGradWeight<float>,
                     runGroupedLinearGradWeight<Bf16>>},
          // Capacity mode's batched GEMMs: the grouped kernels over E
          // equal blocks (no offsets input).
          {"moe_batched_linear",
           byStorage<runGroupedLinear<float>, runGroupedLinear<Bf16>>},
          {"moe_batched_linear_grad_input",
           byStorage<runGroupedLinearGradInput<float>,
                     runGroupedLinearGradInput<Bf16>>},
          {"moe_batched_linear_grad_weight",
           byStorage<runGroupedLinearGradWeight<float>,
                     runGroupedLinearGradWeight<Bf16>>},
      });
}

} // namespace braid::cpu
