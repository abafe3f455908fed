// ThreadSanitizer tree only: OpenBLAS, linked in statically, is not
// instrumented, so the reads and writes of its GEMMs, which compute most
// weight gradients, would be invisible. The TSAN tree links with
// -Wl,--wrap=cblas_sgemm: every call from the kernels lands here, which
// tells ThreadSanitizer of the matrices the call reads and writes, as
// accesses of the calling thread (the call is synchronous), and then runs
// OpenBLAS's.
#include <cblas.h>

#include <cstddef>

#include "kernels/common/TsanAccess.h"

extern "C" void
__real_cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA,
                   enum CBLAS_TRANSPOSE transB, blasint m, blasint n, blasint k,
                   float alpha, const float *a, blasint lda, const float *b,
                   blasint ldb, float beta, float *c, blasint ldc);

namespace {

// The bytes of a `rows` x `cols` matrix with leading dimension `ld`, laid
// out in `order`.
size_t span(enum CBLAS_ORDER order, blasint rows, blasint cols, blasint ld) {
  if (rows <= 0 || cols <= 0)
    return 0;
  const blasint lines = order == CblasRowMajor ? rows : cols;
  const blasint length = order == CblasRowMajor ? cols : rows;
  return (static_cast<size_t>(lines - 1) * ld + length) * sizeof(float);
}

} // namespace

extern "C" void
__wrap_cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA,
                   enum CBLAS_TRANSPOSE transB, blasint m, blasint n, blasint k,
                   float alpha, const float *a, blasint lda, const float *b,
                   blasint ldb, float beta, float *c, blasint ldc) {
  // op(A) is m x k, op(B) k x n, C m x n.
  const bool ta = transA != CblasNoTrans, tb = transB != CblasNoTrans;
  braid::tsanRead(a, span(order, ta ? k : m, ta ? m : k, lda));
  braid::tsanRead(b, span(order, tb ? n : k, tb ? k : n, ldb));
  const size_t cBytes = span(order, m, n, ldc);
  if (beta != 0.0f)
    braid::tsanRead(c, cBytes);
  braid::tsanWrite(c, cBytes);
  __real_cblas_sgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb,
                     beta, c, ldc);
}
