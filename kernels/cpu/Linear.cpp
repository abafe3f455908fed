// linear, linear_grad_input, linear_grad_weight: y = x w^T + b and its
// gradients, on OpenBLAS's sgemm.
//
// OpenBLAS runs its own threads, so sgemm is called from the launching
// thread only; the pool is used for the bias work around it.
#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"

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

// sgemm takes int sizes.
absl::Status fitsBlas(const LaunchChecker &c, const Operand &op, int64_t rows) {
  if (rows <= INT_MAX && op.lastDim() <= INT_MAX)
    return absl::OkStatus();
  return c.error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                              "; the CPU GEMM takes at most ", INT_MAX,
                              " rows and columns"));
}

absl::Status checkLinear(const KernelSignature &sig) {
  LaunchChecker c("linear", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "bias"}, 1));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(c.allF32());
  Operand x = c.in(0), w = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., K]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  const int64_t k = x.lastDim(), m = w.dim(0);
  if (w.dim(1) != k)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                ", expected [M, ", k,
                                "] to match input 0's "
                                "last dimension ",
                                k));
  if (c.numIns() == 3)
    BRAID_KERNEL_TRY(
        c.shape(c.in(2), {m}, "to match input 1 (weight)'s first dimension"));
  BRAID_KERNEL_TRY(c.shape(y, withLastDim(*x.desc, m),
                           "(x's leading dimensions, then weight's M)"));
  BRAID_KERNEL_TRY(fitsBlas(c, x, rowsOf(*x.desc)));
  return fitsBlas(c, w, m);
}

// Fills each of `rows` rows of y (length m) with b, or with zeros.
void fillRows(ThreadPool *pool, float *y, const float *b, int64_t rows,
              int64_t m) {
  parallelFor(pool, rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (b)
        std::memcpy(y + r * m, b, m * sizeof(float));
      else
        std::memset(y + r * m, 0, m * sizeof(float));
    }
  });
}

void runLinear(const KernelArgs &args) {
  const TensorView &x = args.ins[0], &w = args.ins[1], &y = args.outs[0];
  const float *bias = args.ins.size() == 3 ? args.ins[2].f32() : nullptr;
  const int64_t n = rowsOf(*x.desc), k = x.desc->lastDim();
  const int64_t m = w.desc->shape[0];
  if (n == 0 || m == 0)
    return;
  // With a bias, y starts as the bias rows and sgemm adds into it (beta 1).
  if (bias || k == 0)
    fillRows(poolOf(args), y.f32(), bias, n, m);
  if (k == 0)
    return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x.f32(),
              k, w.f32(), k, bias ? 1.0f : 0.0f, y.f32(), m);
}

absl::Status checkLinearGradInput(const KernelSignature &sig) {
  LaunchChecker c("linear_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "weight"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  BRAID_KERNEL_TRY(c.allF32());
  BRAID_KERNEL_TRY(c.accumulateParam());
  Operand dy = c.in(0), w = c.in(1), dx = c.out(0);
  BRAID_KERNEL_TRY(c.minRank(dy, 1, "[..., M]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  const int64_t m = dy.lastDim(), k = w.dim(1);
  if (w.dim(0) != m)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                ", expected [", m,
                                ", K] to match input 0's "
                                "last dimension ",
                                m));
  BRAID_KERNEL_TRY(c.shape(dx, withLastDim(*dy.desc, k),
                           "(dy's leading dimensions, then weight's K)"));
  BRAID_KERNEL_TRY(fitsBlas(c, dy, rowsOf(*dy.desc)));
  return fitsBlas(c, w, m);
}

void runLinearGradInput(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &w = args.ins[1], &dx = args.outs[0];
  const bool accumulate = accumulateOf(args);
  const int64_t n = rowsOf(*dy.desc), m = dy.desc->lastDim();
  const int64_t k = w.desc->shape[1];
  if (n == 0 || k == 0)
    return;
  if (m == 0) {
    if (!accumulate)
      fillRows(poolOf(args), dx.f32(), nullptr, n, k);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, m, 1.0f,
              dy.f32(), m, w.f32(), k, accumulate ? 1.0f : 0.0f, dx.f32(), k);
}

absl::Status checkLinearGradWeight(const KernelSignature &sig) {
  LaunchChecker c("linear_grad_weight", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "x"}));
  BRAID_KERNEL_TRY(c.outputs({"dweight", "dbias"}, 1));
  BRAID_KERNEL_TRY(c.allF32());
  BRAID_KERNEL_TRY(c.accumulateParam());
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(c.minRank(dy, 1, "[..., M]"));
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., K]"));
  if (leadingDims(*x.desc) != leadingDims(*dy.desc))
    return c.error(
        absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                     ", expected the leading dimensions of input 0 (dy) ",
                     shapeString(dy.shape())));
  const int64_t m = dy.lastDim(), k = x.lastDim();
  BRAID_KERNEL_TRY(c.shape(c.out(0), {m, k}, "([dy's M, x's K])"));
  if (c.numOuts() == 2)
    BRAID_KERNEL_TRY(c.shape(c.out(1), {m}, "(dy's last dimension)"));
  BRAID_KERNEL_TRY(fitsBlas(c, dy, rowsOf(*dy.desc)));
  return fitsBlas(c, x, rowsOf(*x.desc));
}

// db[m] (+)= sum over rows of dy[r, m]. Each chunk owns a range of columns
// and adds rows in order, so the bits do not depend on the thread count.
void biasGrad(ThreadPool *pool, const float *dy, float *db, int64_t rows,
              int64_t m, bool accumulate) {
  parallelFor(pool, m, 64, [&](int64_t c0, int64_t c1) {
    const int64_t width = c1 - c0;
    float *acc = threadScratch(0, width);
    std::memset(acc, 0, width * sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      const float *__restrict src = dy + r * m + c0;
      for (int64_t j = 0; j < width; ++j)
        acc[j] += src[j];
    }
    for (int64_t j = 0; j < width; ++j)
      db[c0 + j] = accumulate ? db[c0 + j] + acc[j] : acc[j];
  });
}

void runLinearGradWeight(const KernelArgs &args) {
  const TensorView &dy = args.ins[0], &x = args.ins[1], &dw = args.outs[0];
  const bool accumulate = accumulateOf(args);
  const int64_t n = rowsOf(*dy.desc), m = dy.desc->lastDim();
  const int64_t k = x.desc->lastDim();
  if (m == 0)
    return;
  if (args.outs.size() == 2)
    biasGrad(poolOf(args), dy.f32(), args.outs[1].f32(), n, m, accumulate);
  if (k == 0)
    return;
  if (n == 0) {
    if (!accumulate)
      fillRows(poolOf(args), dw.f32(), nullptr, m, k);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, k, n, 1.0f, dy.f32(),
              m, x.f32(), k, accumulate ? 1.0f : 0.0f, dw.f32(), k);
}

} // namespace

absl::Status registerLinearKernels(KernelRegistry &registry) {
  return registerAll(registry,
                     {
                         {"linear", Device::kCPU, checkLinear, runLinear},
                         {"linear_grad_input", Device::kCPU,
                          checkLinearGradInput, runLinearGradInput},
                         {"linear_grad_weight", Device::kCPU,
                          checkLinearGradWeight, runLinearGradWeight},
                     });
}

} // namespace braid::cpu
