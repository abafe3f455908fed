// enqueueCublasLt and enqueueFallbackGemm (GemmProblem.h) on their own,
// against a host GEMM in double that reads GemmProblem as cuBLASLt
// documents it: strided batches, every transposition, alpha and beta, the
// bias epilogue, and f32 / bf16 operands with f32 or bf16 outputs. The
// linear kernels use only part of this; batched products are for other
// kernels, and the fallback must be right wherever cuBLASLt is not used.
//
// Tolerance: inputs are exact in both dtypes (the same values on host and
// device), so an f32 output differs from the double reference by the f32
// summation error only, within atol = K * 2^-20 for |a|, |b| < 1; a bf16
// output adds one rounding, at most 2^-8 of the value (rtol 2^-7 leaves
// room for a value just across a binade).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/GemmProblem.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test {
namespace {

using cuda::GemmEpilogue;
using cuda::GemmOperands;
using cuda::GemmProblem;
using cuda::RowMajor;

TwinHarness &harness() {
  static TwinHarness *h = new TwinHarness({cuda::registerLinearKernels});
  return *h;
}

// Elements a strided-batch column-major matrix spans.
int64_t spanOf(const cuda::GemmMatrix &x, int32_t batch) {
  return (batch - 1) * x.batchStride + x.ld * (x.cols - 1) + x.rows;
}

// D = alpha op(A) op(B) + beta C (+ bias), in double, in C's layout.
std::vector<double> reference(const GemmProblem &p, const HostTensor &a,
                              const HostTensor &b, const HostTensor &c,
                              const HostTensor *bias) {
  std::vector<double> d(c.numel());
  for (int64_t i = 0; i < c.numel(); ++i)
    d[i] = c.at(i);
  for (int32_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          const int64_t ai = bt * p.a.batchStride +
                             (p.transA ? l + i * p.a.ld : i + l * p.a.ld);
          const int64_t bi = bt * p.b.batchStride +
                             (p.transB ? j + l * p.b.ld : l + j * p.b.ld);
          sum += static_cast<double>(a.at(ai)) * b.at(bi);
        }
        double &out = d[bt * p.c.batchStride + i + j * p.c.ld];
        out = p.alpha * sum + (p.beta != 0 ? p.beta * out : 0.0);
        if (bias != nullptr)
          out += bias->at(i);
      }
  return d;
}

struct Buffers {
  std::vector<void *> ptrs;
  ~Buffers() {
    for (void *p : ptrs)
      cudaFree(p);
  }
  void *upload(const HostTensor &t, cudaStream_t stream) {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(t.bytes.size(), 256)),
              cudaSuccess);
    ptrs.push_back(p);
    EXPECT_EQ(cudaMemcpyAsync(p, t.bytes.data(), t.bytes.size(),
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    return p;
  }
};

enum class Runner { kCublasLt, kFallback };

// Runs p on fresh device copies and compares D with the reference. With
// `mayDecline`, cuBLASLt may report that it has no algorithm for p (odd
// leading dimensions of bf16 operands leave it few); enqueueGemm then runs
// the fallback, which is checked on its own. What cuBLASLt does run must
// be right.
void check(const GemmProblem &p, Runner runner, uint64_t seed,
           bool mayDecline = false) {
  absl::StatusOr<GpuContext> gpu = harness().gpuContext();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  cudaStream_t stream = static_cast<cudaStream_t>(gpu->stream);
  const HostTensor a = randomTensor({spanOf(p.a, p.batch)}, p.a.type, seed);
  const HostTensor b =
      randomTensor({spanOf(p.b, p.batch)}, p.b.type, seed + 1);
  const HostTensor c =
      randomTensor({spanOf(p.c, p.batch)}, p.c.type, seed + 2);
  const HostTensor bias = randomTensor({p.m}, p.biasType, seed + 3);
  const bool hasBias = p.epilogue == GemmEpilogue::kBias;
  Buffers buf;
  GemmOperands ops;
  ops.a = buf.upload(a, stream);
  ops.b = buf.upload(b, stream);
  ops.c = buf.upload(c, stream);
  ops.bias = hasBias ? buf.upload(bias, stream) : nullptr;
  if (runner == Runner::kCublasLt) {
    absl::Status s = cuda::enqueueCublasLt(*gpu, p, ops, gpu->workspace,
                                           gpu->workspaceBytes);
    if (mayDecline && absl::IsUnimplemented(s)) {
      std::printf("note: cuBLASLt declined %s\n", p.toString().c_str());
      return;
    }
    ASSERT_TRUE(s.ok()) << s << " for " << p.toString();
  } else {
    cuda::enqueueFallbackGemm(*gpu, p, ops);
  }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  HostTensor d = c;
  ASSERT_EQ(cudaMemcpyAsync(d.bytes.data(), ops.c, d.bytes.size(),
                            cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  const std::vector<double> want =
      reference(p, a, b, c, hasBias ? &bias : nullptr);
  HostTensor expected = tensorOf(c.desc.shape, DType::kF32,
                                 std::vector<float>(want.begin(), want.end()));
  HostTensor actual = tensorOf(c.desc.shape, DType::kF32, d.toFloats());
  const Tolerance tol{p.c.type == DType::kBF16 ? 1.0 / 128 : 0.0,
                      std::ldexp(static_cast<double>(p.k + 2), -20)};
  EXPECT_TRUE(closeTo(expected, actual, tol))
      << (runner == Runner::kCublasLt ? "cuBLASLt " : "fallback ")
      << p.toString();
}

struct TypeCase {
  DType in, out;
};

const TypeCase kTypes[] = {{DType::kF32, DType::kF32},
                           {DType::kBF16, DType::kBF16},
                           {DType::kBF16, DType::kF32}};

TEST(GemmRunnerTest, BatchedEveryTransposition) {
  const int64_t M = 24, N = 40, K = 32;
  const int32_t batch = 3;
  uint64_t seed = 1;
  for (const TypeCase &t : kTypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          // Row-major a (M x K, or K x M stored when transposed), b, c.
          const RowMajor a{t.in, ta ? K : M, ta ? M : K, ta ? M : K,
                           M * K, ta};
          const RowMajor b{t.in, tb ? N : K, tb ? K : N, tb ? K : N,
                           K * N, tb};
          const RowMajor c{t.out, M, N, N, M * N, false};
          const GemmProblem p =
              cuda::rowMajorProduct(a, b, c, batch, 0.5f, beta);
          ASSERT_TRUE(cuda::validateGemm(p).ok()) << cuda::validateGemm(p);
          for (Runner r : {Runner::kCublasLt, Runner::kFallback})
            check(p, r, seed += 10);
        }
}

TEST(GemmRunnerTest, BiasEpilogue) {
  // Aligned sizes, which cuBLASLt must take, then odd ones, which it may
  // decline (the fallback is checked for both).
  struct Sizes {
    int64_t n, m, k;
    bool mayDecline;
  };
  const Sizes kSizes[] = {{64, 40, 48, false}, {33, 17, 45, true}};
  uint64_t seed = 500;
  for (const Sizes &z : kSizes)
    for (const TypeCase &t : kTypes) {
      if (t.in != t.out)
        continue;  // linear's bias has y's dtype
      GemmProblem p = cuda::linearForward(z.n, z.m, z.k, t.in, t.in, t.out);
      p.epilogue = GemmEpilogue::kBias;
      p.biasType = t.out;
      for (Runner r : {Runner::kCublasLt, Runner::kFallback})
        check(p, r, seed += 10, z.mayDecline);
    }
}

TEST(GemmRunnerTest, FallbackWithEmptyReduction) {
  // k = 0: D = beta C (+ bias); never handed to cuBLASLt.
  for (float beta : {0.0f, 1.0f}) {
    GemmProblem p = cuda::linearGradInput(6, 0, 5, DType::kBF16,
                                          DType::kBF16, DType::kBF16,
                                          beta != 0);
    check(p, Runner::kFallback, 900);
  }
}

}  // namespace
}  // namespace braid::gpu_test
