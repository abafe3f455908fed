// GEMMs as cuBLASLt sees them, built from the row-major tensors of the
// plan.
//
// cuBLASLt is column-major: a matrix is (rows, cols, ld) with element (i, j)
// at i + j * ld. A row-major [R, C] tensor with leading dimension L is the
// column-major (C, R, L) matrix, its transpose, without moving a byte. So
// the row-major product C = op(A) op(B) is the column-major product
// C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B is our A, m and n
// swap, and each operand keeps its own transposition flag. rowMajorProduct
// does exactly this once, for every GEMM of the CUDA kernels; the unit tests
// check it against a host GEMM that interprets GemmProblem the way cuBLASLt
// documents it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid::cuda {

// A column-major matrix in cuBLASLt's terms; `batchStride` elements between
// consecutive matrices of a strided batch.
struct GemmMatrix {
  DType type = DType::kF32;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batchStride = 0;
};

enum class GemmEpilogue {
  kNone,
  kBias,  // D += bias broadcast over columns (length m, of biasType)
};

// D = alpha * op(A) op(B) + beta * C with D = C in place, f32 compute.
// op(A) is m x k, op(B) is k x n, C is m x n; `batch` independent products.
struct GemmProblem {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  GemmMatrix a, b, c;
  float alpha = 1.0f, beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  DType biasType = DType::kF32;

  std::string toString() const;
};

// A row-major matrix of the plan: `rows` x `cols` with `ld` elements between
// rows, used as itself or transposed in a product.
struct RowMajor {
  DType type = DType::kF32;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batchStride = 0;
  bool transposed = false;
};

// The problem computing, for each of `batch` matrices,
// c = alpha * op(a) op(b) + beta * c, all three row-major (c is never
// transposed). Dimensions must agree; validateGemm says whether they do.
GemmProblem rowMajorProduct(const RowMajor &a, const RowMajor &b,
                            const RowMajor &c, int32_t batch, float alpha,
                            float beta);

// Everything cuBLASLt would refuse or misread: operand shapes that disagree
// with m, n, k; leading dimensions below the row count; A and B of different
// types; C neither A's type nor f32 (f32 A and B need f32 C); a batched
// bias; an empty batch.
absl::Status validateGemm(const GemmProblem &p);

// The three GEMMs of the linear kernels, for x [n, k], w [m, k], y [n, m]:
//   linear:             y  = x w^T          (+ bias of length m)
//   linear_grad_input:  dx = dy w           (beta 1 with accumulate)
//   linear_grad_weight: dw = dy^T x         (+ db = column sums of dy)
// dy has `dyLd` elements between rows (0: m, its rows packed).
GemmProblem linearForward(int64_t n, int64_t m, int64_t k, DType x, DType w,
                          DType y);
GemmProblem linearGradInput(int64_t n, int64_t m, int64_t k, DType dy,
                            DType w, DType dx, bool accumulate,
                            int64_t dyLd = 0);
GemmProblem linearGradWeight(int64_t n, int64_t m, int64_t k, DType dy,
                             DType x, DType dw, bool accumulate,
                             int64_t dyLd = 0);

// --- running a GemmProblem -------------------------------------------------

// Device addresses of a GEMM's operands: C is read (beta != 0) and written
// in place; `bias` is read with GemmEpilogue::kBias.
struct GemmOperands {
  const void *a = nullptr;
  const void *b = nullptr;
  void *c = nullptr;
  const void *bias = nullptr;
};

// Enqueues `p` on gpu.stream through cuBLASLt (gpu.api and gpu.blasLt),
// f32 compute and f32 alpha and beta, with `workspace` of `workspaceBytes`
// (256-byte aligned; may be null with 0 bytes). Algorithms come from
// cuBLASLt's heuristic for the problem, the workspace size and the
// alignment of the four addresses, cached per handle. Fails, with nothing
// enqueued, when cuBLASLt is missing from the context or has no algorithm
// for the problem. Host work only: capturable in a CUDA graph.
absl::Status enqueueCublasLt(const GpuContext &gpu, const GemmProblem &p,
                             const GemmOperands &ops, void *workspace,
                             size_t workspaceBytes);

// A plain CUDA kernel with the semantics of cuBLASLt's for `p` (f32
// accumulation in order of k, alpha, beta, bias, rounding once on store):
// correct for every valid problem, but slow. Defined in Linear.cu.
void enqueueFallbackGemm(const GpuContext &gpu, const GemmProblem &p,
                         const GemmOperands &ops);

// cuBLASLt when it takes the problem, else the fallback kernel; nothing for
// an empty output, the fallback for k = 0 (D = beta C (+ bias)). Never
// fails: `run` of the GEMM kernels cannot. Defined in Linear.cu.
void enqueueGemm(const GpuContext &gpu, const GemmProblem &p,
                 const GemmOperands &ops, void *workspace,
                 size_t workspaceBytes);
// The same with the whole workspace of `gpu`.
void enqueueGemm(const GpuContext &gpu, const GemmProblem &p,
                 const GemmOperands &ops);

}  // namespace braid::cuda
