// The fused kernels with dropout draws on CUDA against the CPU, on one TP
// rank's part of an activation (`tp_dim`, docs/kernels.md, "Sequence
// parallel"): the draws must be the CPU's, keyed by the whole tensor's
// element index. fused_bias_dropout_add and the sum of the add + norms are
// a multiply and an add per element after the draw, which nvcc may contract
// into one fused multiply-add (FusedElementwise.cu is not built with
// --fmad=false): rtol 1e-5 (f32) or one bf16 rounding flip. The norms'
// outputs come from block reductions in another order than the CPU's: the
// tolerances of the norm twins (NormsTest.cpp). A wrong mask zeroes or
// keeps a whole element, far beyond either.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h =
      new TwinHarness({cuda::registerFusedElementwiseKernels});
  return *h;
}

KernelParams dropParams(int64_t dim) {
  KernelParams p;
  p.setFloat("p", 0.25);
  p.setInt("rng_offset", 7);
  p.setInt("tp_dim", dim);
  return p;
}

StepValues stepOf(int64_t rank, int64_t ranks) {
  StepValues s{5, 0.0, 0xabcdefull};
  s.tpRank = rank;
  s.tpSize = ranks;
  return s;
}

const std::vector<int64_t> kWhole = {2, 36, 72};

Tolerance elementTol(DType dt) {
  return dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6}
                            : Tolerance{1e-5, 1e-6};
}

TEST(CudaFusedDropout, BiasDropoutAddOfAPartDrawsTheCpuMask) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t dim : {0, 1, 2})
      for (int64_t ranks : {2, 4}) {
        if (kWhole[dim] % ranks != 0)
          continue;
        std::vector<int64_t> part = kWhole;
        part[dim] /= ranks;
        const int64_t m = part.back();
        for (int64_t r = 0; r < ranks; ++r) {
          SCOPED_TRACE(::testing::Message()
                       << dtypeLabel(dt) << " tp_dim " << dim << " rank " << r
                       << " of " << ranks);
          TwinLaunch l = launchOf("fused_bias_dropout_add",
                                  {randomTensor(part, dt, 40 + r),
                                   randomTensor({m}, dt, 50),
                                   randomTensor(part, dt, 60 + r)},
                                  {zeros(part, dt)}, dropParams(dim));
          l.step = stepOf(r, ranks);
          EXPECT_TRUE(twins(harness(), l, {elementTol(dt)}));
        }
      }
}

TEST(CudaFusedDropout, AddNormOfAPartDrawsTheCpuMask) {
  for (bool layer : {true, false})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (int64_t dim : {0, 1})
        for (int64_t ranks : {2, 4}) {
          if (kWhole[dim] % ranks != 0)
            continue;
          std::vector<int64_t> part = kWhole;
          part[dim] /= ranks;
          const int64_t d = part.back();
          const std::vector<int64_t> stats(part.begin(), part.end() - 1);
          const Tolerance smooth = dt == DType::kBF16
                                       ? Tolerance{kBf16Rtol, 1e-3}
                                       : Tolerance{1e-5, 1e-5};
          for (int64_t r = 0; r < ranks; ++r) {
            SCOPED_TRACE(::testing::Message()
                         << (layer ? "layer" : "rms") << " " << dtypeLabel(dt)
                         << " tp_dim " << dim << " rank " << r << " of "
                         << ranks);
            std::vector<HostTensor> ins = {
                randomTensor(part, dt, 70 + r), randomTensor(part, dt, 80 + r),
                randomTensor({d}, dt, 90, 0.5f, 1.5f)};
            std::vector<HostTensor> outs = {zeros(part, dt), zeros(part, dt)};
            std::vector<Tolerance> tols = {elementTol(dt), smooth};
            if (layer) {
              ins.push_back(randomTensor({d}, dt, 91));
              outs.push_back(zeros(stats, DType::kF32));
              tols.push_back(Tolerance{1e-5, 1e-5});
            }
            outs.push_back(zeros(stats, DType::kF32));
            tols.push_back(Tolerance{1e-5, 1e-5});
            KernelParams p = dropParams(dim);
            p.setFloat("eps", 1e-5);
            TwinLaunch l =
                launchOf(layer ? "fused_add_layer_norm" : "fused_add_rms_norm",
                         ins, outs, p);
            l.step = stepOf(r, ranks);
            EXPECT_TRUE(twins(harness(), l, tols));
          }
        }
}

// With cp_dim (docs/kernels.md, "Context parallel"), alone or with tp_dim
// on the same dimension: CP rank c's load-balanced part of the sequence,
// and TP rank t's contiguous part of it.
TEST(CudaFusedDropout, ContextParallelPartsDrawTheCpuMask) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t cp : {2, 4})
      for (int64_t tp : {1, 3}) {
        std::vector<int64_t> part = kWhole;
        part[1] /= cp * tp;
        const int64_t m = part.back();
        const std::vector<int64_t> stats(part.begin(), part.end() - 1);
        for (int64_t r = 0; r < cp * tp; ++r) {
          SCOPED_TRACE(::testing::Message() << dtypeLabel(dt) << " CP " << cp
                                            << " TP " << tp << " rank " << r);
          KernelParams p;
          p.setFloat("p", 0.25);
          p.setInt("rng_offset", 7);
          p.setInt("cp_dim", 1);
          if (tp > 1)
            p.setInt("tp_dim", 1);
          StepValues step = stepOf(r % tp, tp);
          step.cpRank = r / tp;
          step.cpSize = cp;
          TwinLaunch add = launchOf("fused_bias_dropout_add",
                                    {randomTensor(part, dt, 100 + r),
                                     randomTensor({m}, dt, 110),
                                     randomTensor(part, dt, 120 + r)},
                                    {zeros(part, dt)}, p);
          add.step = step;
          EXPECT_TRUE(twins(harness(), add, {elementTol(dt)}));
          KernelParams np = p;
          np.setFloat("eps", 1e-5);
          TwinLaunch norm = launchOf(
              "fused_add_rms_norm",
              {randomTensor(part, dt, 130 + r), randomTensor(part, dt, 140 + r),
               randomTensor({m}, dt, 150, 0.5f, 1.5f)},
              {zeros(part, dt), zeros(part, dt), zeros(stats, DType::kF32)},
              np);
          norm.step = step;
          const Tolerance smooth = dt == DType::kBF16
                                       ? Tolerance{kBf16Rtol, 1e-3}
                                       : Tolerance{1e-5, 1e-5};
          EXPECT_TRUE(twins(harness(), norm,
                            {elementTol(dt), smooth, Tolerance{1e-5, 1e-5}}));
        }
      }
}

} // namespace
} // namespace braid::gpu_test::rows_test
