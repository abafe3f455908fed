#include "kernels/cuda/GemmProblem.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/CublasLtApi.h"

namespace braid::cuda {
namespace {

absl::string_view typeName(DType t) {
  std::string_view s = dtypeName(t);
  return {s.data(), s.size()};
}

std::string matrixString(const GemmMatrix &x) {
  return absl::StrCat(typeName(x.type), " (", x.rows, ", ", x.cols,
                      ", ld ", x.ld, ", batch stride ", x.batchStride, ")");
}

// The column-major view of a row-major matrix: its transpose in place.
GemmMatrix columnMajorView(const RowMajor &x) {
  return GemmMatrix{x.type, x.cols, x.rows, x.ld, x.batchStride};
}

absl::Status checkOperand(const char *name, const GemmMatrix &x, bool trans,
                          int64_t rows, int64_t cols) {
  const int64_t haveRows = trans ? x.cols : x.rows;
  const int64_t haveCols = trans ? x.rows : x.cols;
  if (haveRows != rows || haveCols != cols)
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM operand ", name, " is ", matrixString(x),
        trans ? " transposed" : "", ", expected ", rows, " x ", cols));
  if (x.rows < 0 || x.cols < 0 || x.ld < (x.rows > 1 ? x.rows : 1))
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM operand ", name, " is ", matrixString(x),
                     ": the leading dimension is below the row count"));
  return absl::OkStatus();
}

}  // namespace

std::string GemmProblem::toString() const {
  return absl::StrCat("m ", m, " n ", n, " k ", k, " batch ", batch, ", A ",
                      matrixString(a), transA ? " T" : " N", ", B ",
                      matrixString(b), transB ? " T" : " N", ", C ",
                      matrixString(c));
}

GemmProblem rowMajorProduct(const RowMajor &a, const RowMajor &b,
                            const RowMajor &c, int32_t batch, float alpha,
                            float beta) {
  GemmProblem p;
  // op(a) is M x K and op(b) is K x N in row-major terms; cuBLASLt computes
  // the N x M column-major result, i.e. c's memory, from b's view times a's.
  const int64_t rowsM = a.transposed ? a.cols : a.rows;
  const int64_t colsN = b.transposed ? b.rows : b.cols;
  const int64_t inner = a.transposed ? a.rows : a.cols;
  p.m = colsN;
  p.n = rowsM;
  p.k = inner;
  p.batch = batch;
  p.a = columnMajorView(b);
  p.transA = b.transposed;
  p.b = columnMajorView(a);
  p.transB = a.transposed;
  p.c = columnMajorView(c);
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

absl::Status validateGemm(const GemmProblem &p) {
  if (p.m < 0 || p.n < 0 || p.k < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM with negative size: ", p.toString()));
  if (p.batch < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM with batch ", p.batch, ": ", p.toString()));
  if (absl::Status s = checkOperand("A", p.a, p.transA, p.m, p.k); !s.ok())
    return s;
  if (absl::Status s = checkOperand("B", p.b, p.transB, p.k, p.n); !s.ok())
    return s;
  if (absl::Status s = checkOperand("C", p.c, false, p.m, p.n); !s.ok())
    return s;
  if (p.a.type != p.b.type)
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM operands A and B have types ", typeName(p.a.type),
                     " and ", typeName(p.b.type),
                     "; cuBLASLt multiplies one type"));
  if (p.a.type == DType::kI32)
    return absl::InvalidArgumentError("GEMM of i32 operands");
  if (p.c.type != p.a.type && p.c.type != DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM output of type ", typeName(p.c.type), " over ",
        typeName(p.a.type), " operands; expected ", typeName(p.a.type),
        " or f32"));
  if (p.epilogue == GemmEpilogue::kBias && p.batch != 1)
    return absl::InvalidArgumentError("GEMM bias epilogue over a batch");
  return absl::OkStatus();
}

GemmProblem linearForward(int64_t n, int64_t m, int64_t k, DType x, DType w,
                          DType y) {
  return rowMajorProduct(RowMajor{x, n, k, k, 0, false},
                         RowMajor{w, m, k, k, 0, true},
                         RowMajor{y, n, m, m, 0, false}, 1, 1.0f, 0.0f);
}

GemmProblem linearGradInput(int64_t n, int64_t m, int64_t k, DType dy,
                            DType w, DType dx, bool accumulate,
                            int64_t dyLd) {
  return rowMajorProduct(RowMajor{dy, n, m, dyLd ? dyLd : m, 0, false},
                         RowMajor{w, m, k, k, 0, false},
                         RowMajor{dx, n, k, k, 0, false}, 1, 1.0f,
                         accumulate ? 1.0f : 0.0f);
}

GemmProblem linearGradWeight(int64_t n, int64_t m, int64_t k, DType dy,
                             DType x, DType dw, bool accumulate,
                             int64_t dyLd) {
  return rowMajorProduct(RowMajor{dy, n, m, dyLd ? dyLd : m, 0, true},
                         RowMajor{x, n, k, k, 0, false},
                         RowMajor{dw, m, k, k, 0, false}, 1, 1.0f,
                         accumulate ? 1.0f : 0.0f);
}

// --- cuBLASLt -----------------------------------------------------------------

namespace {

cudaDataType_t cudaTypeOf(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's
// heuristic otherwise assumes 256-byte aligned operands.
uint32_t alignmentOf(const void *ptr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  uint32_t align = 256;
  while (align > 1 && a % align != 0)
    align /= 2;
  return align;
}

// Everything the heuristic's choice depends on.
struct AlgoKey {
  const void *handle;
  bool transA, transB;
  int64_t m, n, k;
  int32_t batch;
  int64_t lda, ldb, ldc, strideA, strideB, strideC;
  int typeA, typeC, epilogue, biasType;
  size_t workspaceBytes;
  uint32_t alignA, alignB, alignC, alignBias;

  auto tie() const {
    return std::tie(handle, transA, transB, m, n, k, batch, lda, ldb, ldc,
                    strideA, strideB, strideC, typeA, typeC, epilogue,
                    biasType, workspaceBytes, alignA, alignB, alignC,
                    alignBias);
  }
  bool operator<(const AlgoKey &o) const { return tie() < o.tie(); }
};

struct AlgoEntry {
  bool found = false;
  cublasLtMatmulAlgo_t algo;
};

std::mutex &algoMutex() {
  static std::mutex *mu = new std::mutex;
  return *mu;
}
std::map<AlgoKey, AlgoEntry> &algoCache() {
  static auto *cache = new std::map<AlgoKey, AlgoEntry>;
  return *cache;
}

// The descriptors of one call, released on every path.
struct Descriptors {
  const CublasLtApi &api;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;

  explicit Descriptors(const CublasLtApi &api) : api(api) {}
  ~Descriptors() {
    if (pref)
      api.preferenceDestroy(pref);
    if (c)
      api.matrixLayoutDestroy(c);
    if (b)
      api.matrixLayoutDestroy(b);
    if (a)
      api.matrixLayoutDestroy(a);
    if (op)
      api.matmulDescDestroy(op);
  }
};

absl::Status lt(const CublasLtApi &api, const char *what,
                cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ",
                                          api.statusString(status)));
}

absl::Status makeLayout(const CublasLtApi &api, const GemmMatrix &x,
                        int32_t batch, cublasLtMatrixLayout_t *out) {
  if (absl::Status s = lt(api, "cublasLtMatrixLayoutCreate",
                          api.matrixLayoutCreate(
                              out, cudaTypeOf(x.type),
                              static_cast<uint64_t>(x.rows),
                              static_cast<uint64_t>(x.cols), x.ld));
      !s.ok())
    return s;
  if (batch > 1) {
    if (absl::Status s = lt(api, "batch count",
                            api.matrixLayoutSetAttribute(
                                *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                &batch, sizeof(batch)));
        !s.ok())
      return s;
    const int64_t stride = x.batchStride;
    if (absl::Status s =
            lt(api, "batch stride",
               api.matrixLayoutSetAttribute(
                   *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                   sizeof(stride)));
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status setOp(const CublasLtApi &api, cublasLtMatmulDesc_t op,
                   cublasLtMatmulDescAttributes_t attr, const T &value) {
  return lt(api, "cublasLtMatmulDescSetAttribute",
            api.matmulDescSetAttribute(op, attr, &value, sizeof(value)));
}

template <typename T>
absl::Status setPref(const CublasLtApi &api, cublasLtMatmulPreference_t pref,
                     cublasLtMatmulPreferenceAttributes_t attr,
                     const T &value) {
  return lt(api, "cublasLtMatmulPreferenceSetAttribute",
            api.preferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

#define GEMM_TRY(expr)                                                        \
  do {                                                                        \
    if (absl::Status gemmStatus = (expr); !gemmStatus.ok())                   \
      return gemmStatus;                                                      \
  } while (0)

}  // namespace

absl::Status enqueueCublasLt(const GpuContext &gpu, const GemmProblem &p,
                             const GemmOperands &ops, void *workspace,
                             size_t workspaceBytes) {
  if (gpu.api == nullptr || gpu.blasLt == nullptr)
    return absl::FailedPreconditionError("no cuBLASLt in the GPU context");
  GEMM_TRY(validateGemm(p));
  if (p.m == 0 || p.n == 0 || p.k == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cuBLASLt takes no empty GEMM: ", p.toString()));
  if (workspace == nullptr)
    workspaceBytes = 0;
  const CublasLtApi &api = *static_cast<const CublasLtApi *>(gpu.api);
  cublasLtHandle_t handle = static_cast<cublasLtHandle_t>(gpu.blasLt);

  Descriptors d(api);
  GEMM_TRY(lt(api, "cublasLtMatmulDescCreate",
              api.matmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  const cublasOperation_t ta = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  GEMM_TRY(setOp(api, d.op, CUBLASLT_MATMUL_DESC_TRANSA, ta));
  GEMM_TRY(setOp(api, d.op, CUBLASLT_MATMUL_DESC_TRANSB, tb));
  const bool bias = p.epilogue == GemmEpilogue::kBias;
  if (bias) {
    GEMM_TRY(setOp(api, d.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                   CUBLASLT_EPILOGUE_BIAS));
    GEMM_TRY(setOp(api, d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ops.bias));
    const cudaDataType_t biasType = cudaTypeOf(p.biasType);
    GEMM_TRY(setOp(api, d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType));
  }
  GEMM_TRY(makeLayout(api, p.a, p.batch, &d.a));
  GEMM_TRY(makeLayout(api, p.b, p.batch, &d.b));
  GEMM_TRY(makeLayout(api, p.c, p.batch, &d.c));

  AlgoKey key{gpu.blasLt,
              p.transA,
              p.transB,
              p.m,
              p.n,
              p.k,
              p.batch,
              p.a.ld,
              p.b.ld,
              p.c.ld,
              p.a.batchStride,
              p.b.batchStride,
              p.c.batchStride,
              static_cast<int>(p.a.type),
              static_cast<int>(p.c.type),
              static_cast<int>(p.epilogue),
              bias ? static_cast<int>(p.biasType) : -1,
              workspaceBytes,
              alignmentOf(ops.a),
              alignmentOf(ops.b),
              alignmentOf(ops.c),
              bias ? alignmentOf(ops.bias) : 256u};
  AlgoEntry entry;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(algoMutex());
    auto it = algoCache().find(key);
    if (it != algoCache().end()) {
      entry = it->second;
      cached = true;
    }
  }
  if (!cached) {
    GEMM_TRY(lt(api, "cublasLtMatmulPreferenceCreate",
                api.preferenceCreate(&d.pref)));
    const uint64_t maxWorkspace = workspaceBytes;
    GEMM_TRY(setPref(api, d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                     maxWorkspace));
    GEMM_TRY(setPref(api, d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                     key.alignA));
    GEMM_TRY(setPref(api, d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                     key.alignB));
    GEMM_TRY(setPref(api, d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                     key.alignC));
    GEMM_TRY(setPref(api, d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                     key.alignC));
    cublasLtMatmulHeuristicResult_t result;
    std::memset(&result, 0, sizeof(result));
    int found = 0;
    const cublasStatus_t status = api.algoGetHeuristic(
        handle, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &result, &found);
    entry.found = status == CUBLAS_STATUS_SUCCESS && found > 0 &&
                  result.state == CUBLAS_STATUS_SUCCESS;
    if (entry.found)
      entry.algo = result.algo;
    std::lock_guard<std::mutex> lock(algoMutex());
    algoCache().emplace(key, entry);
  }
  if (!entry.found)
    return absl::UnimplementedError(
        absl::StrCat("cuBLASLt has no algorithm for ", p.toString()));
  const float alpha = p.alpha, beta = p.beta;
  return lt(api, "cublasLtMatmul",
            api.matmul(handle, d.op, &alpha, ops.a, d.a, ops.b, d.b, &beta,
                       ops.c, d.c, ops.c, d.c, &entry.algo, workspace,
                       workspaceBytes,
                       static_cast<cudaStream_t>(gpu.stream)));
}

}  // namespace braid::cuda
