// Test helpers: launch a registered CPU kernel on host vectors, compare with
// double-precision references, and take finite differences.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/registry/Kernel.h"
#include "gtest/gtest.h"

namespace braid::test {

// Uniform values in [lo, hi) from a fixed seed.
std::vector<float> randomVector(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f);
std::vector<int32_t> randomIds(int64_t n, uint32_t seed, int32_t limit);
int64_t numelOf(const std::vector<int64_t> &shape);

// A pool of `n` threads shared by the tests (n in 1..4).
ThreadPool &testPool(int n);

// One launch of a registered CPU kernel on host memory. Outputs start from
// their initial values on every run(), so repeated runs are comparable.
class Launch {
public:
  explicit Launch(std::string kernel);

  Launch &in(std::vector<int64_t> shape, std::vector<float> values);
  Launch &inIds(std::vector<int64_t> shape, std::vector<int32_t> values);
  // An operand with an explicit dtype and no data: for check() tests.
  Launch &inDesc(std::vector<int64_t> shape, DType dtype);
  Launch &out(std::vector<int64_t> shape, std::vector<float> initial = {});
  Launch &outDesc(std::vector<int64_t> shape, DType dtype);
  // An i32 output, -1 everywhere before each run.
  Launch &outIds(std::vector<int64_t> shape);
  Launch &param(std::string name, int64_t v);
  Launch &paramF(std::string name, double v);

  KernelContext &context() { return ctx_; }
  // The launch's micro-batch (KernelArgs::microBatch).
  int64_t &microBatch() { return microBatch_; }
  KernelParams &params() { return params_; }

  absl::Status check() const;
  // Checks (failing the test on error), then runs on `pool`.
  void run(ThreadPool *pool = nullptr);

  int numOutputs() const { return static_cast<int>(outs_.size()); }
  std::vector<float> &input(int i) { return ins_[i].f; }
  std::vector<float> &output(int i) { return outs_[i].f; }
  const std::vector<int32_t> &outputIds(int i) { return outs_[i].ids; }
  // Replaces the value an output starts from.
  void setInitial(int i, std::vector<float> v) { outs_[i].initial = v; }

private:
  struct Host {
    TensorDesc desc;
    std::vector<float> f, initial;
    std::vector<int32_t> ids;
    void *data() {
      return desc.dtype == DType::kI32 ? static_cast<void *>(ids.data())
                                       : static_cast<void *>(f.data());
    }
  };
  std::string kernel_;
  const KernelDef *def_ = nullptr;
  std::vector<Host> ins_, outs_;
  KernelParams params_;
  KernelContext ctx_;
  int64_t microBatch_ = 0;
};

// Runs the launch with no pool and with pools of 1, 2 and 3 threads and
// expects every output to have the same bits each time.
void expectThreadInvariant(Launch &launch);

// Expects |got - want| <= atol + rtol * |want| element-wise.
void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double rtol, double atol, const std::string &what);

// Checks a gradient against central differences of a scalar function.
// `loss(x)` is evaluated at x + h u and x - h u (rounded to float) for a
// random direction u; the change must match sum(grad * (x+ - x-)) within
// `rtol` of the larger magnitude plus `atol`.
void expectGradientMatches(
    const std::function<double(const std::vector<float> &)> &loss,
    const std::vector<float> &x, const std::vector<float> &grad, double h,
    double rtol, double atol, uint32_t seed, const std::string &what);

// bf16 bits of `f`, rounded to nearest even; and the exact widening back.
uint16_t roundBf16(float f);
float widenBf16(uint16_t b);

// One host operand in its storage type: f32 values in `f`, bf16 bits in `b`,
// i32 ids in `ids`.
struct HostTensor {
  TensorDesc desc;
  std::vector<float> f;
  std::vector<uint16_t> b;
  std::vector<int32_t> ids;

  void *data() {
    if (desc.dtype == DType::kI32)
      return ids.data();
    return desc.dtype == DType::kBF16 ? static_cast<void *>(b.data())
                                      : static_cast<void *>(f.data());
  }
  // The values as f32 (bf16 widened exactly).
  std::vector<float> values() const {
    if (desc.dtype != DType::kBF16)
      return f;
    std::vector<float> out;
    for (uint16_t v : b)
      out.push_back(widenBf16(v));
    return out;
  }
};

// sum(proj * y) in double.
double project(const std::vector<float> &proj, const std::vector<float> &y);

} // namespace braid::test
