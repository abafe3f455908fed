#include "test/unit/kernels/KernelHarness.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace braid::test {

uint16_t roundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float widenBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> randomVector(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

std::vector<int32_t> randomIds(int64_t n, uint32_t seed, int32_t limit) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, limit - 1);
  std::vector<int32_t> v(n);
  for (int32_t &x : v)
    x = dist(gen);
  return v;
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

ThreadPool &testPool(int n) {
  static std::unique_ptr<ThreadPool> pools[5];
  if (!pools[n])
    pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

Launch::Launch(std::string kernel) : kernel_(std::move(kernel)) {
  def_ = defaultKernelRegistry().find(kernel_, Device::kCPU);
  EXPECT_NE(def_, nullptr) << "no CPU kernel named " << kernel_;
}

Launch &Launch::in(std::vector<int64_t> shape, std::vector<float> values) {
  EXPECT_EQ(numelOf(shape), static_cast<int64_t>(values.size()));
  Host h;
  h.desc = TensorDesc{std::move(shape), DType::kF32};
  h.f = std::move(values);
  ins_.push_back(std::move(h));
  return *this;
}

Launch &Launch::inIds(std::vector<int64_t> shape, std::vector<int32_t> values) {
  EXPECT_EQ(numelOf(shape), static_cast<int64_t>(values.size()));
  Host h;
  h.desc = TensorDesc{std::move(shape), DType::kI32};
  h.ids = std::move(values);
  ins_.push_back(std::move(h));
  return *this;
}

Launch &Launch::inDesc(std::vector<int64_t> shape, DType dtype) {
  Host h;
  h.desc = TensorDesc{std::move(shape), dtype};
  ins_.push_back(std::move(h));
  return *this;
}

Launch &Launch::out(std::vector<int64_t> shape, std::vector<float> initial) {
  Host h;
  const int64_t n = numelOf(shape);
  h.desc = TensorDesc{std::move(shape), DType::kF32};
  // NaN where no initial value is given: a kernel that leaves part of an
  // output unwritten is caught by the comparison.
  h.initial = initial.empty() ? std::vector<float>(n, NAN) : std::move(initial);
  EXPECT_EQ(static_cast<int64_t>(h.initial.size()), n);
  outs_.push_back(std::move(h));
  return *this;
}

Launch &Launch::outDesc(std::vector<int64_t> shape, DType dtype) {
  Host h;
  h.desc = TensorDesc{std::move(shape), dtype};
  outs_.push_back(std::move(h));
  return *this;
}

Launch &Launch::outIds(std::vector<int64_t> shape) {
  Host h;
  h.desc = TensorDesc{std::move(shape), DType::kI32};
  outs_.push_back(std::move(h));
  return *this;
}

Launch &Launch::param(std::string name, int64_t v) {
  params_.setInt(std::move(name), v);
  return *this;
}

Launch &Launch::paramF(std::string name, double v) {
  params_.setFloat(std::move(name), v);
  return *this;
}

absl::Status Launch::check() const {
  if (!def_)
    return absl::NotFoundError("kernel not registered");
  std::vector<TensorDesc> ins, outs;
  for (const Host &h : ins_)
    ins.push_back(h.desc);
  for (const Host &h : outs_)
    outs.push_back(h.desc);
  return def_->check(KernelSignature{ins, outs, &params_});
}

void Launch::run(ThreadPool *pool) {
  absl::Status s = check();
  ASSERT_TRUE(s.ok()) << kernel_ << ": " << s;
  std::vector<TensorView> ins, outs;
  for (Host &h : ins_)
    ins.push_back(TensorView{h.data(), &h.desc});
  for (Host &h : outs_) {
    if (h.desc.dtype == DType::kI32)
      h.ids.assign(h.desc.numel(), -1);
    else
      h.f = h.initial;
    outs.push_back(TensorView{h.data(), &h.desc});
  }
  KernelContext ctx = ctx_;
  ctx.pool = pool;
  def_->run(KernelArgs{ins, outs, &params_, &ctx, microBatch_});
}

void expectThreadInvariant(Launch &launch) {
  launch.run(nullptr);
  std::vector<std::vector<float>> first;
  for (int i = 0; i < launch.numOutputs(); ++i)
    first.push_back(launch.output(i));
  for (int threads = 1; threads <= 3; ++threads) {
    launch.run(&testPool(threads));
    for (int i = 0; i < launch.numOutputs(); ++i) {
      const std::vector<float> &got = launch.output(i);
      ASSERT_EQ(got.size(), first[i].size());
      EXPECT_EQ(
          std::memcmp(got.data(), first[i].data(), got.size() * sizeof(float)),
          0)
          << "output " << i << " differs with " << threads << " threads";
    }
  }
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double rtol, double atol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::abs(want[i]))) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected "
                    << want[i] << " (error " << err << ")";
      if (++reported == 5)
        return;
    }
  }
}

double project(const std::vector<float> &proj, const std::vector<float> &y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += static_cast<double>(proj[i]) * y[i];
  return s;
}

void expectGradientMatches(
    const std::function<double(const std::vector<float> &)> &loss,
    const std::vector<float> &x, const std::vector<float> &grad, double h,
    double rtol, double atol, uint32_t seed, const std::string &what) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  const std::vector<float> u = randomVector(x.size(), seed);
  std::vector<float> plus(x), minus(x);
  for (size_t i = 0; i < x.size(); ++i) {
    plus[i] = static_cast<float>(x[i] + h * u[i]);
    minus[i] = static_cast<float>(x[i] - h * u[i]);
  }
  double predicted = 0;
  for (size_t i = 0; i < x.size(); ++i)
    predicted += static_cast<double>(grad[i]) *
                 (static_cast<double>(plus[i]) - minus[i]);
  const double measured = loss(plus) - loss(minus);
  EXPECT_NEAR(measured, predicted,
              atol + rtol * std::max(std::abs(measured), std::abs(predicted)))
      << what << ": central difference vs gradient";
}

} // namespace braid::test
