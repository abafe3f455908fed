// bf16 storage computes the same function as f32 storage: every kernel run
// in its bf16 launch, on values that bf16 represents exactly, gives each
// output of the f32 run rounded once (docs/kernels.md, "Storage
// precision"). Kernels compute in f32 whatever they store, so the only
// difference allowed is the final rounding of a bf16 output: half a bf16
// ulp, 2^-9 relative. The bound used, 2^-8 relative to the element plus
// 2^-8 of 1e-3 of the output's largest magnitude (for elements that cancel
// to near zero), is twice that.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/ThreadPool.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "test/unit/kernels/ValidLaunches.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  // Truncation is enough here: the inputs only need to be representable.
  return static_cast<uint16_t>(u >> 16);
}
float fromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One operand's memory, in its dtype, filled from `values`.
struct Buffer {
  TensorDesc desc;
  std::vector<float> f;
  std::vector<uint16_t> b;
  std::vector<int32_t> ids;

  Buffer(const TensorDesc &d, const std::vector<float> &values) : desc(d) {
    const int64_t n = desc.numel();
    if (desc.dtype == DType::kI32) {
      // Token ids and labels: small enough for every vocabulary of the
      // launches.
      for (int64_t i = 0; i < n; ++i)
        ids.push_back(static_cast<int32_t>(i % 2));
    } else if (desc.dtype == DType::kBF16) {
      for (int64_t i = 0; i < n; ++i)
        b.push_back(toBf16(values[i]));
    } else {
      f.assign(values.begin(), values.begin() + n);
    }
  }
  void *data() {
    if (desc.dtype == DType::kI32)
      return ids.data();
    return desc.dtype == DType::kBF16 ? static_cast<void *>(b.data())
                                      : static_cast<void *>(f.data());
  }
  std::vector<float> asFloats() const {
    if (desc.dtype != DType::kBF16)
      return f;
    std::vector<float> out;
    for (uint16_t v : b)
      out.push_back(fromBf16(v));
    return out;
  }
};

// Runs `sig` on values that depend only on the operand index, each rounded
// to bf16 first, so that the f32 and the bf16 launch see equal inputs and
// equal initial outputs (for accumulating kernels).
std::vector<std::vector<float>> runLaunch(const test::Sig &sig, int threads) {
  std::vector<Buffer> ins, outs;
  auto values = [](const TensorDesc &d, uint32_t seed) {
    std::vector<float> v = test::randomVector(d.numel() + 1, seed);
    for (float &x : v)
      x = fromBf16(toBf16(x));
    return v;
  };
  for (size_t i = 0; i < sig.ins.size(); ++i)
    ins.emplace_back(sig.ins[i], values(sig.ins[i], 100 + i));
  for (size_t i = 0; i < sig.outs.size(); ++i)
    outs.emplace_back(sig.outs[i], values(sig.outs[i], 200 + i));
  std::vector<TensorView> inViews, outViews;
  for (Buffer &b : ins)
    inViews.push_back({b.data(), &b.desc});
  for (Buffer &b : outs)
    outViews.push_back({b.data(), &b.desc});
  KernelContext ctx;
  ctx.step = 3;
  ctx.seed = 1234;
  ctx.lr = 1e-3;
  ctx.pool = &test::testPool(threads);
  const KernelDef *def = defaultKernelRegistry().find(sig.kernel, Device::kCPU);
  EXPECT_NE(def, nullptr) << sig.kernel;
  if (!def)
    return {};
  def->run(KernelArgs{inViews, outViews, &sig.params, &ctx});
  std::vector<std::vector<float>> result;
  for (const Buffer &b : outs)
    result.push_back(b.asFloats());
  return result;
}

TEST(Bf16Storage, EveryKernelMatchesF32WithinOneRounding) {
  int compared = 0;
  for (const auto &[name, valid] : test::validLaunches()) {
    std::optional<test::Sig> bf16 = test::bf16Launch(valid);
    ASSERT_TRUE(bf16.has_value()) << name;
    ASSERT_TRUE(bf16->check().ok()) << bf16->check();
    bool anyBf16 = false;
    for (const auto *ops : {&bf16->ins, &bf16->outs})
      for (const TensorDesc &d : *ops)
        anyBf16 |= d.dtype == DType::kBF16;
    if (!anyBf16)
      continue; // f32 only (the optimizer kernels), or integers only
    // cast's own bf16 launch converts nothing: compare f32 -> f32 instead.
    test::Sig wide = valid;
    for (TensorDesc &d : wide.outs)
      if (d.dtype == DType::kBF16)
        d.dtype = DType::kF32;
    const auto want = runLaunch(wide, 2);
    const auto got = runLaunch(*bf16, 2);
    ASSERT_EQ(want.size(), got.size()) << name;
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(want[o].size(), got[o].size());
      double largest = 0;
      for (float v : want[o])
        largest = std::max(largest, std::fabs(static_cast<double>(v)));
      for (size_t i = 0; i < want[o].size(); ++i) {
        const double w = want[o][i], g = got[o][i];
        const double bound = std::ldexp(std::fabs(w) + 1e-3 * largest, -8);
        ASSERT_LE(std::fabs(g - w), bound)
            << name << " output " << o << " element " << i << ": bf16 " << g
            << ", f32 " << w;
      }
    }
    ++compared;
  }
  // The catalogue less adamw, multi_adamw, grad_norm, step_guard,
  // document_ids, cross_entropy_combine, the router's twelve f32 kernels
  // (moe_route, moe_scores, moe_topk, moe_expert_counts, moe_aux_loss,
  // moe_z_loss, their gradients, and moe_bias_update) and four i32 ones
  // (moe_sort, and expert parallel's moe_block_counts, moe_ep_offsets,
  // moe_hot_experts).
  EXPECT_EQ(compared, static_cast<int>(test::validLaunches().size()) - 22);
}

// The bf16 paths split work as the f32 ones do: the bits do not depend on
// the number of threads.
TEST(Bf16Storage, ResultsDoNotDependOnThreads) {
  for (const auto &[name, valid] : test::validLaunches()) {
    std::optional<test::Sig> bf16 = test::bf16Launch(valid);
    ASSERT_TRUE(bf16.has_value()) << name;
    const auto one = runLaunch(*bf16, 1);
    const auto three = runLaunch(*bf16, 3);
    for (size_t o = 0; o < one.size(); ++o)
      EXPECT_EQ(0, std::memcmp(one[o].data(), three[o].data(),
                               one[o].size() * sizeof(float)))
          << name << " output " << o;
  }
}

} // namespace
} // namespace braid
