// The fused loss and optimizer kernels against the unfused kernels they
// replace (docs/fusion.md, "Loss and optimizer"):
//  * linear_cross_entropy and linear_cross_entropy_with_grad against
//    linear + cross_entropy + cross_entropy_grad_input + linear_grad_input
//    + linear_grad_weight, for chunks of one row up to the whole problem.
//    In f32, with one chunk holding every row, the logits, lse, dlogits,
//    loss, dx and dW are formed by the same reductions as the unfused
//    kernels', so they are compared bit for bit. Smaller chunks run sgemm
//    over fewer rows, which may sum in another order: the logits, lse,
//    loss and dx are then held to d 2^-24 of their largest magnitude. With several chunks dW is the
//    sum of per-chunk sgemm reductions instead of one over all N rows: each
//    ordering of a sum of N terms is within N 2^-24 sum|term| of the exact
//    sum, so the two differ by at most 2 N 2^-24 sum_r |dl[r,v] x[r,d]|,
//    the bound checked per element (N + 1 terms with an accumulated dW).
//    In bf16 storage the fused kernels compute in f32 and round only dx
//    (and a bf16 dW): their results are those of the fused f32 run on the
//    same (widened) inputs, bit for bit, dx rounded once. The unfused bf16
//    group also rounds the logits and dlogits it stores. Each stored logit
//    l moves by up to 2^-9 |l|, so with L the largest |lse| (which bounds
//    the logits that matter) a probability moves by a factor of up to
//    exp(2^-8 L), about 1 + 2^-8 L, and each dlogit by 2^-9 more; dx and dW
//    sum such terms. The bound used, 2^-8 (1 + L) of the output's largest
//    magnitude, is what that gives per term; measured differences are 4 to
//    10 times smaller.
//  * linear_cross_entropy_stats and linear_cross_entropy_grad on two TP
//    ranks' shards of the vocabulary against linear + cross_entropy_stats
//    and cross_entropy_grad_input (vocab_shard) + linear_grad_input +
//    linear_grad_weight on the same shard, under the same rules.
//  * multi_adamw against one adamw per tensor: bit for bit, with weight
//    decay on some tensors, over three steps with clipping active.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/ThreadPool.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

// One operand in its storage type.
struct Tensor : HostTensor {
  static Tensor of(std::vector<int64_t> shape, DType dtype,
                   const std::vector<float> &values) {
    Tensor t;
    t.desc = {std::move(shape), dtype};
    const int64_t n = t.desc.numel();
    if (dtype == DType::kBF16)
      for (int64_t i = 0; i < n; ++i)
        t.b.push_back(roundBf16(values[i]));
    else
      t.f.assign(values.begin(), values.begin() + n);
    return t;
  }
  static Tensor zeros(std::vector<int64_t> shape, DType dtype) {
    TensorDesc d{shape, dtype};
    return of(shape, dtype, std::vector<float>(d.numel(), 0.0f));
  }
  static Tensor labels(std::vector<int64_t> shape, std::vector<int32_t> v) {
    Tensor t;
    t.desc = {std::move(shape), DType::kI32};
    t.ids = std::move(v);
    return t;
  }
};

// Checks and runs `kernel` on the tensors, outputs in place.
void run(const std::string &kernel, std::vector<Tensor *> ins,
         std::vector<Tensor *> outs, const KernelParams &params, int threads,
         int64_t step = 1, double lr = 0, int64_t tpRank = 0) {
  const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
  ASSERT_NE(def, nullptr) << kernel;
  std::vector<TensorDesc> inDescs, outDescs;
  for (Tensor *t : ins)
    inDescs.push_back(t->desc);
  for (Tensor *t : outs)
    outDescs.push_back(t->desc);
  absl::Status s = def->check(KernelSignature{inDescs, outDescs, &params});
  ASSERT_TRUE(s.ok()) << s;
  std::vector<TensorView> inViews, outViews;
  for (Tensor *t : ins)
    inViews.push_back({t->data(), &t->desc});
  for (Tensor *t : outs)
    outViews.push_back({t->data(), &t->desc});
  KernelContext ctx;
  ctx.step = step;
  ctx.update = step;
  ctx.lr = lr;
  ctx.tpRank = tpRank;
  ctx.tpSize = tpRank + 1;
  ctx.pool = threads > 0 ? &testPool(threads) : nullptr;
  def->run(KernelArgs{inViews, outViews, &params, &ctx});
}

void expectSameBits(const Tensor &got, const Tensor &want,
                    const std::string &what) {
  const std::vector<float> g = got.values(), w = want.values();
  ASSERT_EQ(g.size(), w.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0 && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << g[i] << ", unfused "
                    << w[i];
}

// The problem: x [2, rows/2, d], w [v, d], labels with one outside [0, v)
// (it contributes no target logit, fused or not).
struct Problem {
  int64_t rows, d, v;
  DType dtype;
  Tensor x, w, labels;
  std::vector<int64_t> lead() const { return {2, rows / 2}; }
};

Problem makeProblem(int64_t rows, int64_t d, int64_t v, DType dtype) {
  Problem p{rows, d, v, dtype, {}, {}, {}};
  p.x = Tensor::of({2, rows / 2, d}, dtype, randomVector(rows * d, 7, -2, 2));
  p.w = Tensor::of({v, d}, dtype, randomVector(v * d, 8, -1, 1));
  std::vector<int32_t> labels = randomIds(rows, 9, static_cast<int32_t>(v));
  labels[3] = static_cast<int32_t>(v);
  p.labels = Tensor::labels(p.lead(), labels);
  return p;
}

// The unfused group's results, and the logits gradient.
struct Unfused {
  Tensor loss, lse, dx, dw, dl;
};

Unfused unfused(Problem &p, double scale, const Tensor &dw0,
                bool accumulate) {
  Unfused u;
  Tensor logits = Tensor::zeros({2, p.rows / 2, p.v}, p.dtype);
  KernelParams none;
  run("linear", {&p.x, &p.w}, {&logits}, none, 2);
  u.loss = Tensor::zeros({}, DType::kF32);
  u.lse = Tensor::zeros(p.lead(), DType::kF32);
  run("cross_entropy", {&logits, &p.labels}, {&u.loss, &u.lse}, none, 2);
  u.dl = Tensor::zeros({2, p.rows / 2, p.v}, p.dtype);
  KernelParams s;
  s.setFloat("scale", scale);
  run("cross_entropy_grad_input", {&logits, &p.labels, &u.lse}, {&u.dl}, s,
      2);
  u.dx = Tensor::zeros({2, p.rows / 2, p.d}, p.dtype);
  run("linear_grad_input", {&u.dl, &p.w}, {&u.dx}, none, 2);
  u.dw = dw0;
  KernelParams acc;
  acc.setInt("accumulate", accumulate ? 1 : 0);
  run("linear_grad_weight", {&u.dl, &p.x}, {&u.dw}, acc, 2);
  return u;
}

// The fused results: loss and lse of the forward-only kernel, and loss, dx
// and dW of the kernel with the gradient.
struct Fused {
  Tensor loss, lse, trainLoss, dx, dw;
};

Fused fused(Problem &p, double scale, const Tensor &dw0, bool accumulate,
            int64_t chunk, int threads) {
  Fused f;
  KernelParams fwd;
  fwd.setInt("chunk", chunk);
  f.loss = Tensor::zeros({}, DType::kF32);
  f.lse = Tensor::zeros(p.lead(), DType::kF32);
  run("linear_cross_entropy", {&p.x, &p.w, &p.labels}, {&f.loss, &f.lse}, fwd,
      threads);
  KernelParams train;
  train.setFloat("scale", scale);
  train.setInt("accumulate", accumulate ? 1 : 0);
  f.trainLoss = Tensor::zeros({}, DType::kF32);
  f.dx = Tensor::zeros({2, p.rows / 2, p.d}, p.dtype);
  f.dw = dw0;
  // The workspace holds the rows that `chunk` logits hold (at least one).
  const int64_t chunkRows =
      std::min(p.rows, std::max<int64_t>(1, chunk / p.v));
  Tensor workspace = Tensor::zeros({chunkRows, p.v}, DType::kF32);
  run("linear_cross_entropy_with_grad", {&p.x, &p.w, &p.labels},
      {&f.trainLoss, &f.dx, &f.dw, &workspace}, train, threads);
  return f;
}

// dW summed over chunks of rows against one reduction over all rows: within
// 2 N 2^-24 sum_r |dl[r,v] x[r,d]| per element (see the file comment), with
// the accumulated dW0 as one more term.
void expectWeightGradNear(const Tensor &got, const Unfused &want,
                          const Problem &p, const Tensor &dw0) {
  const std::vector<float> g = got.values(), w = want.dw.values();
  const std::vector<float> dl = want.dl.values(), x = p.x.values();
  const std::vector<float> start = dw0.values();
  double worstRatio = 0;
  for (int64_t v = 0; v < p.v; ++v)
    for (int64_t d = 0; d < p.d; ++d) {
      double magnitude = std::fabs(start[v * p.d + d]);
      for (int64_t r = 0; r < p.rows; ++r)
        magnitude += std::fabs(static_cast<double>(dl[r * p.v + v]) *
                               x[r * p.d + d]);
      const double bound = 2.0 * (p.rows + 1) * std::ldexp(magnitude, -24);
      const double diff = std::fabs(static_cast<double>(g[v * p.d + d]) -
                                    w[v * p.d + d]);
      if (bound > 0)
        worstRatio = std::max(worstRatio, diff / bound);
      EXPECT_LE(diff, bound) << "dw[" << v << ", " << d << "]";
    }
  std::printf("dw over chunks of rows: worst difference %.3g of the bound\n",
              worstRatio);
}

// The largest magnitude of `want` and the largest |got - want|.
struct Gap {
  double largest = 0, worst = 0;
};
Gap gapOf(const Tensor &got, const Tensor &want) {
  const std::vector<float> g = got.values(), w = want.values();
  EXPECT_EQ(g.size(), w.size());
  Gap gap;
  for (float v : w)
    gap.largest = std::max(gap.largest, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < std::min(g.size(), w.size()); ++i)
    gap.worst =
        std::max(gap.worst, std::fabs(static_cast<double>(g[i]) - w[i]));
  return gap;
}

// |got - want| <= `relative` of the output's largest magnitude.
void expectWithin(const Tensor &got, const Tensor &want, double relative,
                  const std::string &what) {
  const Gap gap = gapOf(got, want);
  EXPECT_LE(gap.worst, relative * gap.largest) << what;
}

// |got - want| <= 2^-8 (1 + logitScale) of the output's largest magnitude,
// see the file comment.
void expectNearUnfused(const Tensor &got, const Tensor &want,
                       double logitScale, const std::string &what) {
  const Gap gap = gapOf(got, want);
  std::printf("%s: largest %.3g, worst difference from unfused bf16 %.3g "
              "(%.3g of largest)\n",
              what.c_str(), gap.largest, gap.worst, gap.worst / gap.largest);
  EXPECT_LE(gap.worst, std::ldexp(gap.largest * (1 + logitScale), -8))
      << what;
}

void compareFused(int64_t rows, int64_t d, int64_t v, DType dtype,
                  int64_t chunk, bool accumulate, int threads) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " d " + std::to_string(d) +
               " v " + std::to_string(v) + " chunk " + std::to_string(chunk) +
               (dtype == DType::kBF16 ? " bf16" : " f32") +
               (accumulate ? " accumulate" : "") + " threads " +
               std::to_string(threads));
  Problem p = makeProblem(rows, d, v, dtype);
  const double scale = 0.5;
  // The weight gradient is f32 over either storage, as the plans make it.
  const Tensor dw0 =
      accumulate ? Tensor::of({v, d}, DType::kF32, randomVector(v * d, 10))
                 : Tensor::zeros({v, d}, DType::kF32);
  Unfused want = unfused(p, scale, dw0, accumulate);
  Fused got = fused(p, scale, dw0, accumulate, chunk, threads);
  expectSameBits(got.trainLoss, got.loss, "loss with the gradient");
  if (dtype == DType::kF32) {
    if (chunk >= rows * v) {
      expectSameBits(got.loss, want.loss, "loss");
      expectSameBits(got.lse, want.lse, "lse");
      expectSameBits(got.dx, want.dx, "dx");
      expectSameBits(got.dw, want.dw, "dw");
      return;
    }
    // A chunk's logits come from an sgemm over fewer rows, which OpenBLAS
    // may reduce in another order (its AVX-512 kernels for few rows do):
    // each logit, a sum of d products, then moves by up to d 2^-24 of the
    // sum of their magnitudes, and lse, dlogits and dx with it.
    const double bound = std::ldexp(static_cast<double>(d), -24);
    expectWithin(got.loss, want.loss, bound, "loss");
    expectWithin(got.lse, want.lse, bound, "lse");
    expectWithin(got.dx, want.dx, bound, "dx");
    expectWeightGradNear(got.dw, want, p, dw0);
    return;
  }
  // The f32 twin: the same values, widened.
  Problem wide = p;
  wide.dtype = DType::kF32;
  wide.x = Tensor::of(p.x.desc.shape, DType::kF32, p.x.values());
  wide.w = Tensor::of(p.w.desc.shape, DType::kF32, p.w.values());
  Fused f32 = fused(wide, scale, dw0, accumulate, chunk, threads);
  expectSameBits(got.loss, f32.loss, "loss");
  expectSameBits(got.lse, f32.lse, "lse");
  expectSameBits(got.dx, Tensor::of(f32.dx.desc.shape, DType::kBF16,
                                    f32.dx.values()),
                 "dx");
  expectSameBits(got.dw, f32.dw, "dw");
  double scaleOfLogits = 0;
  for (float l : want.lse.values())
    scaleOfLogits = std::max(scaleOfLogits, std::fabs(static_cast<double>(l)));
  expectNearUnfused(got.loss, want.loss, scaleOfLogits, "loss");
  expectNearUnfused(got.lse, want.lse, scaleOfLogits, "lse");
  expectNearUnfused(got.dx, want.dx, scaleOfLogits, "dx");
  expectNearUnfused(got.dw, want.dw, scaleOfLogits, "dw");
}

TEST(LinearCrossEntropy, MatchesTheUnfusedKernelsInF32) {
  // One row (or vocabulary entry) per chunk, a few, and all at once.
  for (int64_t chunk : {int64_t{1}, int64_t{3 * 50}, int64_t{1} << 20})
    compareFused(74, 24, 50, DType::kF32, chunk, false, 2);
  compareFused(74, 24, 50, DType::kF32, 7 * 50 + 3, true, 3);
}

TEST(LinearCrossEntropy, Bf16IsTheF32ComputationRoundedOnce) {
  for (int64_t chunk : {int64_t{1}, int64_t{5 * 50}, int64_t{1} << 20})
    compareFused(74, 24, 50, DType::kBF16, chunk, false, 2);
  compareFused(74, 24, 50, DType::kBF16, 300, true, 1);
}

TEST(LinearCrossEntropy, LargerShapesAndNoPool) {
  compareFused(256, 64, 300, DType::kF32, 4096, true, 0);
  compareFused(256, 64, 300, DType::kBF16, 4096, false, 3);
}

TEST(LinearCrossEntropy, ResultsDoNotDependOnThreads) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<std::vector<float>> first;
    for (int threads = 0; threads <= 3; ++threads) {
      Problem p = makeProblem(40, 16, 33, dtype);
      KernelParams params;
      params.setInt("chunk", 100);
      params.setFloat("scale", 1.0);
      Tensor loss = Tensor::zeros({}, DType::kF32);
      Tensor lse = Tensor::zeros(p.lead(), DType::kF32);
      run("linear_cross_entropy", {&p.x, &p.w, &p.labels}, {&loss, &lse},
          params, threads);
      Tensor trainLoss = Tensor::zeros({}, DType::kF32);
      Tensor dx = Tensor::zeros({2, 20, 16}, dtype);
      Tensor dw = Tensor::zeros({33, 16}, DType::kF32);
      Tensor workspace = Tensor::zeros({3, 33}, DType::kF32);
      run("linear_cross_entropy_with_grad", {&p.x, &p.w, &p.labels},
          {&trainLoss, &dx, &dw, &workspace}, params, threads);
      std::vector<std::vector<float>> got = {loss.values(), lse.values(),
                                             trainLoss.values(), dx.values(),
                                             dw.values()};
      if (threads == 0) {
        first = got;
        continue;
      }
      for (size_t o = 0; o < got.size(); ++o)
        EXPECT_EQ(0, std::memcmp(got[o].data(), first[o].data(),
                                 got[o].size() * sizeof(float)))
            << "output " << o << " with " << threads << " threads";
    }
  }
}

TEST(LinearCrossEntropy, ChecksRefuseMismatchedShapes) {
  const KernelDef *def =
      defaultKernelRegistry().find("linear_cross_entropy", Device::kCPU);
  ASSERT_NE(def, nullptr);
  KernelParams params;
  std::vector<TensorDesc> ins = {{{4, 8}, DType::kF32},
                                 {{16, 6}, DType::kF32},
                                 {{4}, DType::kI32}};
  std::vector<TensorDesc> outs = {{{}, DType::kF32}, {{4}, DType::kF32}};
  absl::Status s = def->check(KernelSignature{ins, outs, &params});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("linear_cross_entropy: "),
            std::string::npos)
      << s;
  ins[1].shape = {16, 8};
  EXPECT_TRUE(def->check(KernelSignature{ins, outs, &params}).ok());
  params.setInt("chunk", 0);
  EXPECT_FALSE(def->check(KernelSignature{ins, outs, &params}).ok());
}

// --- the vocabulary-parallel pair ---------------------------------------

// Rank r's rows [r * n, (r + 1) * n) of w [P * n, d], in its storage type.
Tensor rowsOf(const Tensor &w, int64_t r, int64_t n) {
  const int64_t d = w.desc.shape[1];
  const std::vector<float> all = w.values();
  return Tensor::of({n, d}, w.desc.dtype,
                    std::vector<float>(all.begin() + r * n * d,
                                       all.begin() + (r + 1) * n * d));
}

// One TP rank's part of the vocabulary-parallel loss: its statistics, then
// (given the group's lse) its dx term and dW.
struct ShardResults {
  Tensor stats, dx, dw;
};

// The unfused kernels braid-shard emits, on rank `rank`'s shard `shard` of
// the problem's vocabulary; `lse` null: statistics only.
ShardResults unfusedShard(Problem &p, Tensor &shard, int64_t rank,
                          const Tensor *lse, double scale, Tensor *dl) {
  const int64_t vs = shard.desc.shape[0];
  ShardResults u;
  KernelParams none;
  Tensor logits = Tensor::zeros({2, p.rows / 2, vs}, p.dtype);
  run("linear", {&p.x, &shard}, {&logits}, none, 2, 1, 0, rank);
  u.stats = Tensor::zeros({2, p.rows / 2, 3}, DType::kF32);
  run("cross_entropy_stats", {&logits, &p.labels}, {&u.stats}, none, 2, 1, 0,
      rank);
  if (!lse)
    return u;
  KernelParams g;
  g.setFloat("scale", scale);
  g.setInt("vocab_shard", 1);
  *dl = Tensor::zeros({2, p.rows / 2, vs}, p.dtype);
  Tensor lseCopy = *lse;
  run("cross_entropy_grad_input", {&logits, &p.labels, &lseCopy}, {dl}, g, 2,
      1, 0, rank);
  u.dx = Tensor::zeros({2, p.rows / 2, p.d}, p.dtype);
  run("linear_grad_input", {dl, &shard}, {&u.dx}, none, 2, 1, 0, rank);
  u.dw = Tensor::zeros({vs, p.d}, DType::kF32);
  run("linear_grad_weight", {dl, &p.x}, {&u.dw}, none, 2, 1, 0, rank);
  return u;
}

ShardResults fusedShard(Problem &p, Tensor &shard, int64_t rank,
                        const Tensor &lse, double scale, int64_t chunk,
                        int threads) {
  const int64_t vs = shard.desc.shape[0];
  ShardResults f;
  KernelParams fwd;
  fwd.setInt("chunk", chunk);
  f.stats = Tensor::zeros({2, p.rows / 2, 3}, DType::kF32);
  run("linear_cross_entropy_stats", {&p.x, &shard, &p.labels}, {&f.stats},
      fwd, threads, 1, 0, rank);
  KernelParams g;
  g.setFloat("scale", scale);
  f.dx = Tensor::zeros({2, p.rows / 2, p.d}, p.dtype);
  f.dw = Tensor::zeros({vs, p.d}, DType::kF32);
  Tensor workspace = Tensor::zeros(
      {std::min(p.rows, std::max<int64_t>(1, chunk / vs)), vs}, DType::kF32);
  Tensor lseCopy = lse;
  run("linear_cross_entropy_grad", {&p.x, &shard, &p.labels, &lseCopy},
      {&f.dx, &f.dw, &workspace}, g, threads, 1, 0, rank);
  return f;
}

// The whole vocabulary's lse from the ranks' statistics, as
// cross_entropy_combine makes it after the all-gather.
Tensor combinedLse(const Problem &p, const std::vector<ShardResults> &ranks) {
  std::vector<float> all;
  for (const ShardResults &r : ranks) {
    const std::vector<float> v = r.stats.values();
    all.insert(all.end(), v.begin(), v.end());
  }
  Tensor stats = Tensor::of({2 * static_cast<int64_t>(ranks.size()),
                             p.rows / 2, 3},
                            DType::kF32, all);
  Tensor loss = Tensor::zeros({}, DType::kF32);
  Tensor lse = Tensor::zeros(p.lead(), DType::kF32);
  Problem q = p;
  run("cross_entropy_combine", {&stats, &q.labels}, {&loss, &lse},
      KernelParams(), 2);
  return lse;
}

// Two TP ranks' shards of a vocabulary of 2 * vs (labels on both ranks,
// one outside the whole vocabulary): the fused pair against the unfused
// kernels, bit for bit with one chunk, within the bounds of the file
// comment with smaller ones.
void compareShards(int64_t rows, int64_t d, int64_t vs, int64_t chunk,
                   int threads) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " chunk " +
               std::to_string(chunk));
  Problem p = makeProblem(rows, d, 2 * vs, DType::kF32);
  const double scale = 0.5;
  std::vector<Tensor> shards = {rowsOf(p.w, 0, vs), rowsOf(p.w, 1, vs)};
  std::vector<ShardResults> stats;
  for (int64_t r = 0; r < 2; ++r)
    stats.push_back(unfusedShard(p, shards[r], r, nullptr, scale, nullptr));
  const Tensor lse = combinedLse(p, stats);
  const double bound = std::ldexp(static_cast<double>(d), -24);
  for (int64_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    Tensor dl;
    ShardResults want = unfusedShard(p, shards[r], r, &lse, scale, &dl);
    ShardResults got =
        fusedShard(p, shards[r], r, lse, scale, chunk, threads);
    if (chunk >= rows * vs) {
      expectSameBits(got.stats, want.stats, "stats");
      expectSameBits(got.dx, want.dx, "dx");
      expectSameBits(got.dw, want.dw, "dw");
      continue;
    }
    expectWithin(got.stats, want.stats, bound, "stats");
    expectWithin(got.dx, want.dx, bound, "dx");
    Problem shard = p;
    shard.v = vs;
    Unfused u;
    u.dw = want.dw;
    u.dl = dl;
    expectWeightGradNear(got.dw, u, shard,
                         Tensor::zeros({vs, d}, DType::kF32));
  }
}

TEST(VocabParallelLinearCrossEntropy, MatchesTheUnfusedShardKernels) {
  for (int64_t chunk : {int64_t{1}, int64_t{4 * 25}, int64_t{1} << 20})
    compareShards(74, 24, 25, chunk, 2);
  compareShards(40, 16, 33, 7 * 33, 0);
}

TEST(VocabParallelLinearCrossEntropy, Bf16IsTheF32ComputationRoundedOnce) {
  Problem p = makeProblem(40, 16, 2 * 17, DType::kBF16);
  Problem wide = p;
  wide.dtype = DType::kF32;
  wide.x = Tensor::of(p.x.desc.shape, DType::kF32, p.x.values());
  wide.w = Tensor::of(p.w.desc.shape, DType::kF32, p.w.values());
  const Tensor lse = Tensor::of(p.lead(), DType::kF32,
                                randomVector(40, 11, 3, 4));
  for (int64_t r = 0; r < 2; ++r) {
    Tensor shard = rowsOf(p.w, r, 17), wideShard = rowsOf(wide.w, r, 17);
    ShardResults got = fusedShard(p, shard, r, lse, 1.0, 5 * 17, 2);
    ShardResults f32 = fusedShard(wide, wideShard, r, lse, 1.0, 5 * 17, 2);
    expectSameBits(got.stats, f32.stats, "stats");
    expectSameBits(got.dx,
                   Tensor::of(f32.dx.desc.shape, DType::kBF16,
                              f32.dx.values()),
                   "dx");
    expectSameBits(got.dw, f32.dw, "dw");
  }
}

// --- multi_adamw -------------------------------------------------------

TEST(MultiAdamw, MatchesPerTensorAdamwBitForBit) {
  // Sizes across the kernel's block of 16384 elements, and a scalar-sized
  // tensor; the first two decay.
  const std::vector<std::vector<int64_t>> shapes = {
      {130, 257}, {3, 5}, {40000}, {1}, {16384}};
  const int64_t n = static_cast<int64_t>(shapes.size()), decayed = 2;
  std::vector<Tensor> grads, pa, ma, va, pb, mb, vb;
  for (int64_t i = 0; i < n; ++i) {
    TensorDesc d{shapes[i], DType::kF32};
    Tensor p = Tensor::of(shapes[i], DType::kF32,
                          randomVector(d.numel(), 20 + i));
    pa.push_back(p);
    pb.push_back(p);
    ma.push_back(Tensor::zeros(shapes[i], DType::kF32));
    va.push_back(Tensor::zeros(shapes[i], DType::kF32));
    mb.push_back(ma.back());
    vb.push_back(va.back());
    grads.push_back(Tensor::zeros(shapes[i], DType::kF32));
  }
  KernelParams common;
  common.setFloat("beta1", 0.9);
  common.setFloat("beta2", 0.95);
  common.setFloat("eps", 1e-8);
  common.setFloat("grad_clip", 1.0);
  for (int64_t t = 1; t <= 3; ++t) {
    const double lr = 1e-3 * static_cast<double>(t);
    for (int64_t i = 0; i < n; ++i)
      grads[i] = Tensor::of(shapes[i], DType::kF32,
                            randomVector(grads[i].desc.numel(),
                                         100 * t + i, -3, 3));
    Tensor norm = Tensor::zeros({}, DType::kF32);
    Tensor skip = Tensor::zeros({}, DType::kF32);
    std::vector<Tensor *> g;
    for (Tensor &x : grads)
      g.push_back(&x);
    run("grad_norm", g, {&norm}, KernelParams(), 2);
    ASSERT_GT(norm.f[0], 1.0f); // clipping is active

    for (int64_t i = 0; i < n; ++i) {
      KernelParams p = common;
      p.setFloat("weight_decay", i < decayed ? 0.1 : 0.0);
      run("adamw", {&grads[i], &norm, &skip}, {&pa[i], &ma[i], &va[i]}, p, 2,
          t, lr);
    }
    KernelParams p = common;
    p.setFloat("weight_decay", 0.1);
    p.setInt("decayed", decayed);
    std::vector<Tensor *> ins = g, outs;
    ins.push_back(&norm);
    ins.push_back(&skip);
    for (auto *part : {&pb, &mb, &vb})
      for (Tensor &x : *part)
        outs.push_back(&x);
    run("multi_adamw", ins, outs, p, 3, t, lr);
    for (int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE("step " + std::to_string(t) + " tensor " +
                   std::to_string(i));
      expectSameBits(pb[i], pa[i], "param");
      expectSameBits(mb[i], ma[i], "exp_avg");
      expectSameBits(vb[i], va[i], "exp_avg_sq");
    }
  }
}

TEST(MultiAdamw, ChecksCountOperands) {
  const KernelDef *def =
      defaultKernelRegistry().find("multi_adamw", Device::kCPU);
  ASSERT_NE(def, nullptr);
  KernelParams params;
  params.setFloat("beta1", 0.9);
  params.setFloat("beta2", 0.95);
  params.setFloat("eps", 1e-8);
  params.setFloat("grad_clip", 1.0);
  params.setFloat("weight_decay", 0.1);
  params.setInt("decayed", 1);
  std::vector<TensorDesc> ins = {{{4}, DType::kF32}, {{2, 3}, DType::kF32},
                                 {{}, DType::kF32}, {{}, DType::kF32}};
  std::vector<TensorDesc> outs = {{{4}, DType::kF32}, {{2, 3}, DType::kF32},
                                  {{4}, DType::kF32}, {{2, 3}, DType::kF32},
                                  {{4}, DType::kF32}, {{2, 3}, DType::kF32}};
  EXPECT_TRUE(def->check(KernelSignature{ins, outs, &params}).ok());
  outs.pop_back();
  EXPECT_FALSE(def->check(KernelSignature{ins, outs, &params}).ok());
  outs.push_back({{3, 2}, DType::kF32});
  EXPECT_FALSE(def->check(KernelSignature{ins, outs, &params}).ok());
  outs.back().shape = {2, 3};
  params.setInt("decayed", 3);
  EXPECT_FALSE(def->check(KernelSignature{ins, outs, &params}).ok());
}

TEST(MultiAdamw, SkippedStepChangesNothing) {
  Tensor grad = Tensor::of({5000}, DType::kF32, randomVector(5000, 3));
  Tensor param = Tensor::of({5000}, DType::kF32, randomVector(5000, 4));
  Tensor m = Tensor::zeros({5000}, DType::kF32);
  Tensor v = Tensor::zeros({5000}, DType::kF32);
  Tensor norm = Tensor::of({}, DType::kF32, {1.0f});
  Tensor skip = Tensor::of({}, DType::kF32, {1.0f});
  const Tensor before = param;
  KernelParams p;
  p.setFloat("beta1", 0.9);
  p.setFloat("beta2", 0.95);
  p.setFloat("eps", 1e-8);
  p.setFloat("grad_clip", 1.0);
  p.setFloat("weight_decay", 0.1);
  p.setInt("decayed", 1);
  run("multi_adamw", {&grad, &norm, &skip}, {&param, &m, &v}, p, 2, 1, 1e-3);
  expectSameBits(param, before, "param");
  expectSameBits(m, Tensor::zeros({5000}, DType::kF32), "exp_avg");
}

} // namespace
} // namespace braid::test
