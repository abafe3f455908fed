// The sequence-parallel kernels and parameters of docs/kernels.md,
// "Sequence parallel": each runs once per simulated TP rank (ctx.tpRank,
// ctx.tpSize, 2 and 4 ranks), and the ranks' results, put together as the
// whole tensor is cut (concatenated along the cut dimension), must equal
// the whole kernel's result bit for bit: the layout kernels only copy, and
// with `tp_dim` each element is computed with the whole tensor's draw.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

// A shape cut at dimension `dim`: [outer, shape[dim], inner].
struct Cut {
  int64_t outer = 1, mid = 1, inner = 1;
};

Cut cutAt(const std::vector<int64_t> &shape, int64_t dim) {
  Cut c;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim)
      c.outer *= shape[i];
    else if (i == dim)
      c.mid = shape[i];
    else
      c.inner *= shape[i];
  }
  return c;
}

// `shape` with dimension `dim` divided by `parts`.
std::vector<int64_t> partShape(std::vector<int64_t> shape, int64_t dim,
                               int64_t parts) {
  shape[dim] /= parts;
  return shape;
}

// Part `rank` of `parts` of x (shape `shape`) along `dim`.
template <typename T>
std::vector<T> part(const std::vector<T> &x, const std::vector<int64_t> &shape,
                    int64_t dim, int64_t rank, int64_t parts) {
  const Cut c = cutAt(shape, dim);
  const int64_t l = c.mid / parts;
  std::vector<T> out;
  for (int64_t o = 0; o < c.outer; ++o)
    for (int64_t m = rank * l; m < (rank + 1) * l; ++m)
      for (int64_t i = 0; i < c.inner; ++i)
        out.push_back(x[(o * c.mid + m) * c.inner + i]);
  return out;
}

// The parts (each of shape partShape(shape, dim, parts.size())) put back
// together along `dim` into a tensor of shape `shape`.
template <typename T>
std::vector<T> assemble(const std::vector<std::vector<T>> &parts,
                        const std::vector<int64_t> &shape, int64_t dim) {
  const Cut c = cutAt(shape, dim);
  const int64_t p = static_cast<int64_t>(parts.size()), l = c.mid / p;
  std::vector<T> out(c.outer * c.mid * c.inner);
  for (int64_t r = 0; r < p; ++r)
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t m = 0; m < l; ++m)
        for (int64_t i = 0; i < c.inner; ++i)
          out[(o * c.mid + r * l + m) * c.inner + i] =
              parts[r][(o * l + m) * c.inner + i];
  return out;
}

void setRank(Launch &l, int64_t rank, int64_t size) {
  l.context().tpRank = rank;
  l.context().tpSize = size;
}

std::string rankName(int64_t rank, int64_t size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

std::vector<int32_t> idsOf(int64_t n, int32_t seed) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<int32_t>((i * 7919 + seed * 104729) % 100003) - 50000;
  return v;
}

// One launch of a copy kernel on bf16 bit patterns, outside the harness
// (which stores f32 and i32 only). y starts as 0xFFFF (a NaN) everywhere.
std::vector<uint16_t> runBf16(const std::string &kernel,
                              const std::vector<int64_t> &xShape,
                              const std::vector<uint16_t> &x,
                              const std::vector<int64_t> &yShape, int64_t dim,
                              int64_t rank, int64_t size) {
  const TensorDesc xd{xShape, DType::kBF16}, yd{yShape, DType::kBF16};
  std::vector<uint16_t> in = x, out(numelOf(yShape), 0xFFFF);
  KernelParams params;
  params.setInt("dim", dim);
  const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
  EXPECT_NE(def, nullptr) << kernel;
  if (!def)
    return {};
  const TensorDesc ins[] = {xd}, outs[] = {yd};
  absl::Status st = def->check(KernelSignature{ins, outs, &params});
  EXPECT_TRUE(st.ok()) << st;
  const TensorView inViews[] = {{in.data(), &xd}};
  const TensorView outViews[] = {{out.data(), &yd}};
  KernelContext ctx;
  ctx.tpRank = rank;
  ctx.tpSize = size;
  ctx.pool = &testPool(2);
  def->run(KernelArgs{inViews, outViews, &params, &ctx});
  return out;
}

std::vector<uint16_t> bf16Of(const std::vector<float> &v) {
  std::vector<uint16_t> b;
  for (float f : v)
    b.push_back(roundBf16(f));
  return b;
}

// The whole activation: [B, S, H].
const std::vector<int64_t> kWhole = {4, 8, 6};

// --- take_part -------------------------------------------------------------

struct TakePart : ::testing::TestWithParam<int> {
  int ranks = GetParam();
};

TEST_P(TakePart, EachRankTakesItsPartInEveryDtype) {
  const int64_t n = numelOf(kWhole);
  const std::vector<float> x = randomVector(n, 31);
  const std::vector<int32_t> ids = idsOf(n, 3);
  for (int64_t dim = 0; dim < 3; ++dim) {
    if (kWhole[dim] % ranks != 0)
      continue;
    const std::vector<int64_t> shape = partShape(kWhole, dim, ranks);
    std::vector<std::vector<float>> got;
    for (int r = 0; r < ranks; ++r) {
      const std::string name =
          rankName(r, ranks) + ", dim " + std::to_string(dim);
      Launch l("take_part");
      l.in(kWhole, x).out(shape).param("dim", dim);
      setRank(l, r, ranks);
      l.run(&testPool(3));
      EXPECT_EQ(l.output(0), part(x, kWhole, dim, r, ranks)) << name;
      got.push_back(l.output(0));

      Launch li("take_part");
      li.inIds(kWhole, ids).outIds(shape).param("dim", dim);
      setRank(li, r, ranks);
      li.run(&testPool(2));
      EXPECT_EQ(li.outputIds(0), part(ids, kWhole, dim, r, ranks))
          << name << ", i32";

      EXPECT_EQ(runBf16("take_part", kWhole, bf16Of(x), shape, dim, r, ranks),
                part(bf16Of(x), kWhole, dim, r, ranks))
          << name << ", bf16";
    }
    EXPECT_EQ(assemble(got, kWhole, dim), x) << "dim " << dim;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TakePart, ::testing::Values(2, 4));

// x [2, 4, 3] cut into parts of 2 along dimension 1 (P = 2) on a TP axis of
// 4: ranks 2 and 3 have no part and write zeros, reading nothing.
TEST(TakePart, RanksPastThePartsWriteZeros) {
  const std::vector<float> x = randomVector(24, 32);
  for (int r = 0; r < 4; ++r) {
    Launch l("take_part");
    l.in({2, 4, 3}, x).out({2, 2, 3}).param("dim", 1);
    setRank(l, r, 4);
    l.run();
    if (r < 2)
      EXPECT_EQ(l.output(0), part(x, {2, 4, 3}, 1, r, 2)) << r;
    else
      EXPECT_EQ(l.output(0), std::vector<float>(12, 0.0f)) << r;
  }
}

// With P = 1 (y the shape of x) every rank copies x whole.
TEST(TakePart, OnePartIsACopy) {
  const std::vector<float> x = randomVector(24, 33);
  Launch l("take_part");
  l.in({2, 4, 3}, x).out({2, 4, 3}).param("dim", 2);
  l.run();
  EXPECT_EQ(l.output(0), x);
}

// --- stack_parts, unstack_parts ---------------------------------------------

// y[k*d0 + i, ..., j, ...] = x[i, ..., k*n + j, ...] by the definition, for
// x of `shape` cut into `parts` along `dim`.
template <typename T>
std::vector<T> stackedReference(const std::vector<T> &x,
                                const std::vector<int64_t> &shape, int64_t dim,
                                int64_t parts) {
  std::vector<T> out;
  for (int64_t k = 0; k < parts; ++k) {
    // Block k of dimension 0 is part k along `dim`, row by row of x.
    const std::vector<T> pk = part(x, shape, dim, k, parts);
    out.insert(out.end(), pk.begin(), pk.end());
  }
  return out;
}

struct StackCase {
  std::vector<int64_t> shape; // x of stack_parts
  int64_t dim;
  int64_t parts;
};

void PrintTo(const StackCase &c, std::ostream *os) {
  *os << "[";
  for (size_t i = 0; i < c.shape.size(); ++i)
    *os << (i ? ", " : "") << c.shape[i];
  *os << "] dim " << c.dim << ", " << c.parts << " parts";
}

class StackParts : public ::testing::TestWithParam<StackCase> {
protected:
  StackCase c = GetParam();
  std::vector<int64_t> stacked() const {
    std::vector<int64_t> s = partShape(c.shape, c.dim, c.parts);
    s[0] *= c.parts;
    return s;
  }
};

TEST_P(StackParts, MovesPartKToBlockKAndBackInEveryDtype) {
  const int64_t n = numelOf(c.shape);
  const std::vector<float> x = randomVector(n, 41);
  const std::vector<float> want = stackedReference(x, c.shape, c.dim, c.parts);
  // The index formula itself, on one element: y[k*d0 + i, .., j, ..] =
  // x[i, .., k*n + j, ..] with k = parts - 1, i = d0 - 1, j = 0, the other
  // indices 0.
  {
    const Cut xc = cutAt(c.shape, c.dim);
    const std::vector<int64_t> ys = stacked();
    const int64_t d0 = c.shape[0], pn = c.shape[c.dim] / c.parts;
    const int64_t k = c.parts - 1, i = d0 - 1;
    // x index: i in dim 0, k*pn in dim `dim`.
    int64_t xi = i;
    for (int64_t d = 1; d < static_cast<int64_t>(c.shape.size()); ++d)
      xi = xi * c.shape[d] + (d == c.dim ? k * pn : 0);
    int64_t yi = k * d0 + i;
    for (int64_t d = 1; d < static_cast<int64_t>(ys.size()); ++d)
      yi = yi * ys[d];
    ASSERT_LT(xi, xc.outer * xc.mid * xc.inner);
    EXPECT_EQ(want[yi], x[xi]);
  }
  Launch s("stack_parts");
  s.in(c.shape, x).out(stacked()).param("dim", c.dim);
  s.run(&testPool(3));
  EXPECT_EQ(s.output(0), want);
  Launch u("unstack_parts");
  u.in(stacked(), s.output(0)).out(c.shape).param("dim", c.dim);
  u.run(&testPool(2));
  EXPECT_EQ(u.output(0), x);

  const std::vector<int32_t> ids = idsOf(n, 4);
  Launch si("stack_parts");
  si.inIds(c.shape, ids).outIds(stacked()).param("dim", c.dim);
  si.run(&testPool(3));
  EXPECT_EQ(si.outputIds(0), stackedReference(ids, c.shape, c.dim, c.parts));
  Launch ui("unstack_parts");
  ui.inIds(stacked(), si.outputIds(0)).outIds(c.shape).param("dim", c.dim);
  ui.run();
  EXPECT_EQ(ui.outputIds(0), ids);

  const std::vector<uint16_t> b = bf16Of(x);
  const std::vector<uint16_t> sb =
      runBf16("stack_parts", c.shape, b, stacked(), c.dim, 0, 1);
  EXPECT_EQ(sb, stackedReference(b, c.shape, c.dim, c.parts));
  EXPECT_EQ(runBf16("unstack_parts", stacked(), sb, c.shape, c.dim, 0, 1), b);
}

// What the two prepare: a reduce-scatter and an all-gather along `dim`
// done by collectives that work along dimension 0. Rank r holds a partial
// sum x_r of the whole tensor; stack_parts, then the reduce-scatter (rank k
// gets block k of the sum over ranks, in rank order), must give rank k part
// k of sum_r x_r: take_part of the summed whole. Then the all-gather of the
// parts (stacked along dimension 0 in rank order) and unstack_parts must
// give back the whole sum.
TEST_P(StackParts, ReduceScatterAndAllGatherAlongTheDimension) {
  const int64_t n = numelOf(c.shape), p = c.parts, block = n / p;
  std::vector<std::vector<float>> partial, stackedParts;
  for (int r = 0; r < p; ++r) {
    partial.push_back(randomVector(n, 50 + r));
    Launch s("stack_parts");
    s.in(c.shape, partial.back()).out(stacked()).param("dim", c.dim);
    s.run(&testPool(2));
    stackedParts.push_back(s.output(0));
  }
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < n; ++i)
      sum[i] += partial[r][i];
  std::vector<float> gathered;
  for (int k = 0; k < p; ++k) {
    std::vector<float> reduced(block, 0.0f);
    for (int r = 0; r < p; ++r)
      for (int64_t i = 0; i < block; ++i)
        reduced[i] += stackedParts[r][k * block + i];
    Launch t("take_part");
    t.in(c.shape, sum).out(partShape(c.shape, c.dim, p)).param("dim", c.dim);
    setRank(t, k, p);
    t.run();
    EXPECT_EQ(reduced, t.output(0)) << rankName(k, p);
    gathered.insert(gathered.end(), reduced.begin(), reduced.end());
  }
  Launch u("unstack_parts");
  u.in(stacked(), gathered).out(c.shape).param("dim", c.dim);
  u.run(&testPool(3));
  EXPECT_EQ(u.output(0), sum);
}

// The ring order of the TP overlap's rings (docs/kernels.md): block s of
// stack_parts holds part (rank - s - ring_offset) mod P, and unstack_parts
// with the same order puts each block back at its part.
TEST_P(StackParts, RingOrderRotatesTheBlocksByRank) {
  const std::vector<float> x = randomVector(numelOf(c.shape), 43);
  const std::vector<float> plain = stackedReference(x, c.shape, c.dim, c.parts);
  const int64_t block = numelOf(c.shape) / c.parts;
  for (int64_t offset : {0, 1})
    for (int64_t r = 0; r < c.parts; ++r) {
      SCOPED_TRACE(absl::StrCat("offset ", offset, ", ", rankName(r, c.parts)));
      Launch s("stack_parts");
      s.in(c.shape, x).out(stacked()).param("dim", c.dim);
      s.param("ring", 1).param("ring_offset", offset);
      setRank(s, r, c.parts);
      s.run(&testPool(3));
      for (int64_t b = 0; b < c.parts; ++b) {
        const int64_t part = ((r - b - offset) % c.parts + c.parts) % c.parts;
        EXPECT_TRUE(std::equal(s.output(0).begin() + b * block,
                               s.output(0).begin() + (b + 1) * block,
                               plain.begin() + part * block))
            << "block " << b << " is not part " << part;
      }
      Launch u("unstack_parts");
      u.in(stacked(), s.output(0)).out(c.shape).param("dim", c.dim);
      u.param("ring", 1).param("ring_offset", offset);
      setRank(u, r, c.parts);
      u.run(&testPool(2));
      EXPECT_EQ(u.output(0), x);
    }
  // Not with balanced parts.
  Launch bad("stack_parts");
  bad.in(c.shape, x).out(stacked()).param("dim", c.dim);
  bad.param("ring", 1).param("balanced", 1);
  EXPECT_FALSE(bad.check().ok());
}

INSTANTIATE_TEST_SUITE_P(Shapes, StackParts,
                         ::testing::Values(StackCase{{4, 8, 6}, 1, 2},
                                           StackCase{{4, 8, 6}, 1, 4},
                                           StackCase{{4, 8, 6}, 2, 2},
                                           StackCase{{3, 2, 8, 5}, 2, 4},
                                           StackCase{{3, 8}, 1, 4}));

// --- dropout with tp_dim
// ------------------------------------------------------

// A [B, S, H] activation large enough that a rank's part is split over
// threads inside its chunks.
const std::vector<int64_t> kAct = {4, 48, 160};
constexpr double kP = 0.3;

void setDraws(Launch &l) {
  l.paramF("p", kP).param("rng_offset", 9);
  l.context().seed = 1234;
  l.context().step = 6;
  l.microBatch() = 3;
}

struct DropoutCase {
  const char *kernel;
  int ranks;
};

void PrintTo(const DropoutCase &c, std::ostream *os) {
  *os << c.kernel << ", " << c.ranks << " ranks";
}

class DropoutParts : public ::testing::TestWithParam<DropoutCase> {
protected:
  DropoutCase c = GetParam();
  std::vector<float> x = randomVector(numelOf(kAct), 61);

  Launch whole() const {
    Launch l(c.kernel);
    l.in(kAct, x).out(kAct);
    setDraws(l);
    return l;
  }
  Launch rank(int64_t dim, int r, bool withParam) const {
    const std::vector<int64_t> shape = partShape(kAct, dim, c.ranks);
    Launch l(c.kernel);
    l.in(shape, part(x, kAct, dim, r, c.ranks)).out(shape);
    setDraws(l);
    if (withParam)
      l.param("tp_dim", dim);
    setRank(l, r, c.ranks);
    return l;
  }
};

TEST_P(DropoutParts, RanksMasksAssembleToTheWholeMask) {
  Launch w = whole();
  w.run(&testPool(2));
  for (int64_t dim : {1, 0, 2}) {
    std::vector<std::vector<float>> parts;
    for (int r = 0; r < c.ranks; ++r) {
      Launch l = rank(dim, r, true);
      l.run(&testPool(3));
      EXPECT_EQ(l.output(0), part(w.output(0), kAct, dim, r, c.ranks))
          << rankName(r, c.ranks) << ", tp_dim " << dim;
      parts.push_back(l.output(0));
    }
    EXPECT_EQ(assemble(parts, kAct, dim), w.output(0)) << "tp_dim " << dim;
  }
}

// Without tp_dim a rank's part draws the mask of the whole tensor's first
// elements: the test above would catch a kernel that ignored the parameter.
TEST_P(DropoutParts, WithoutTheParameterTheDrawsDiffer) {
  Launch w = whole();
  w.run();
  const int last = c.ranks - 1;
  Launch l = rank(1, last, false);
  l.run();
  EXPECT_NE(l.output(0), part(w.output(0), kAct, 1, last, c.ranks));
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, DropoutParts,
    ::testing::Values(DropoutCase{"dropout", 2}, DropoutCase{"dropout", 4},
                      DropoutCase{"dropout_grad_input", 2},
                      DropoutCase{"dropout_grad_input", 4}));

// tp_dim -1, or any tp_dim on a TP axis of one rank: the kernel of old.
TEST(DropoutParts, WholeTensorsDrawAsWithoutTheParameter) {
  const std::vector<float> x = randomVector(numelOf(kAct), 62);
  Launch plain("dropout");
  plain.in(kAct, x).out(kAct);
  setDraws(plain);
  plain.run(&testPool(3));
  for (int64_t dim : {-1, 0, 1, 2}) {
    Launch l("dropout");
    l.in(kAct, x).out(kAct).param("tp_dim", dim);
    setDraws(l);
    l.run(&testPool(2));
    EXPECT_EQ(l.output(0), plain.output(0)) << "tp_dim " << dim;
  }
  // And the mask is the flat-index mask of the catalogue: kept elements are
  // x / (1 - p), the others 0, with about p of them dropped.
  int64_t dropped = 0;
  const float scale = 1.0f / (1.0f - static_cast<float>(kP));
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = plain.output(0)[i];
    if (y == 0.0f && x[i] != 0.0f)
      ++dropped;
    else
      EXPECT_EQ(y, x[i] * scale) << i;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), kP, 0.02);
}

// --- fused kernels with dropout draws
// -----------------------------------------

struct FusedCase {
  const char *kernel;
  int ranks;
};

void PrintTo(const FusedCase &c, std::ostream *os) {
  *os << c.kernel << ", " << c.ranks << " ranks";
}

class FusedDropoutParts : public ::testing::TestWithParam<FusedCase> {
protected:
  FusedCase c = GetParam();
  const std::string k = c.kernel;
  const bool norm = k != "fused_bias_dropout_add";
  const bool layer = k == "fused_add_layer_norm";
  const int64_t h = kAct.back();
  std::vector<float> a = randomVector(numelOf(kAct), 71); // h or residual
  std::vector<float> b = randomVector(numelOf(kAct), 72); // residual or x
  std::vector<float> bias = randomVector(h, 73);
  std::vector<float> gamma = randomVector(h, 74, 0.5f, 1.5f);
  std::vector<float> beta = randomVector(h, 75);

  // The launch over activations of `shape` holding `a` and `b`; dim >= 0:
  // rank r's part along dim.
  Launch launch(const std::vector<int64_t> &shape, std::vector<float> aa,
                std::vector<float> bb, int64_t dim, int r) const {
    Launch l(k);
    std::vector<int64_t> stats(shape.begin(), shape.end() - 1);
    // A part along H holds its part of the bias too.
    const int64_t m = shape.back();
    const std::vector<float> bs = m == h ? bias : part(bias, {h}, 0, r, h / m);
    if (norm) {
      l.in(shape, aa).in(shape, bb).in({h}, gamma);
      if (layer)
        l.in({h}, beta);
      l.out(shape).out(shape);
      if (layer)
        l.out(stats);
      l.out(stats).paramF("eps", 1e-5);
    } else {
      l.in(shape, aa).in({m}, bs).in(shape, bb).out(shape);
    }
    setDraws(l);
    if (dim >= 0) {
      l.param("tp_dim", dim);
      setRank(l, r, c.ranks);
    }
    return l;
  }
};

TEST_P(FusedDropoutParts, RanksOutputsAssembleToTheWholeOutputs) {
  Launch w = launch(kAct, a, b, -1, 0);
  w.run(&testPool(2));
  const std::vector<int64_t> stats(kAct.begin(), kAct.end() - 1);
  // The norms read whole rows: their parts cut B or S, never H.
  const std::vector<int64_t> dims =
      norm ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{1, 0, 2};
  for (int64_t dim : dims) {
    std::vector<std::vector<std::vector<float>>> outs(w.numOutputs());
    for (int r = 0; r < c.ranks; ++r) {
      const std::vector<int64_t> shape = partShape(kAct, dim, c.ranks);
      Launch l = launch(shape, part(a, kAct, dim, r, c.ranks),
                        part(b, kAct, dim, r, c.ranks), dim, r);
      l.run(&testPool(3));
      for (int o = 0; o < w.numOutputs(); ++o) {
        const bool stat = norm && o >= 2;
        const std::vector<int64_t> &whole = stat ? stats : kAct;
        EXPECT_EQ(l.output(o), part(w.output(o), whole, dim, r, c.ranks))
            << rankName(r, c.ranks) << ", tp_dim " << dim << ", output " << o;
        outs[o].push_back(l.output(o));
      }
    }
    EXPECT_EQ(assemble(outs[0], kAct, dim), w.output(0)) << "tp_dim " << dim;
  }
  // Without the parameter the last rank's part draws other masks.
  const int last = c.ranks - 1;
  Launch plain =
      launch(partShape(kAct, 1, c.ranks), part(a, kAct, 1, last, c.ranks),
             part(b, kAct, 1, last, c.ranks), -1, 0);
  setRank(plain, last, c.ranks);
  plain.run();
  EXPECT_NE(plain.output(0), part(w.output(0), kAct, 1, last, c.ranks));
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, FusedDropoutParts,
    ::testing::Values(FusedCase{"fused_bias_dropout_add", 2},
                      FusedCase{"fused_bias_dropout_add", 4},
                      FusedCase{"fused_add_layer_norm", 2},
                      FusedCase{"fused_add_layer_norm", 4},
                      FusedCase{"fused_add_rms_norm", 2},
                      FusedCase{"fused_add_rms_norm", 4}));

// --- checks
// -------------------------------------------------------------------

std::string checkMessage(Launch &l) {
  absl::Status s = l.check();
  EXPECT_FALSE(s.ok());
  return std::string(s.message());
}

TEST(SequenceParallelChecks, TakePart) {
  auto make = [](std::vector<int64_t> y, int64_t dim, DType yt = DType::kF32) {
    Launch l("take_part");
    l.inDesc({4, 6, 5}, DType::kF32).outDesc(std::move(y), yt);
    l.param("dim", dim);
    return l;
  };
  for (auto [y, dim] :
       std::vector<std::pair<std::vector<int64_t>, int>>{{{4, 3, 5}, 1},
                                                         {{4, 2, 5}, 1},
                                                         {{4, 6, 5}, 1},
                                                         {{1, 6, 5}, 0},
                                                         {{4, 6, 1}, 2}}) {
    Launch l = make(y, dim);
    EXPECT_TRUE(l.check().ok()) << l.check();
  }
  Launch notDividing = make({4, 4, 5}, 1);
  EXPECT_THAT(checkMessage(notDividing),
              HasSubstr("take_part: output 0 (y) has shape [4, 4, 5], "
                        "expected [4, x[1] / P, 5] for an integer P >= 1"));
  Launch otherDim = make({4, 3, 4}, 1);
  EXPECT_THAT(checkMessage(otherDim), HasSubstr("has shape [4, 3, 4]"));
  Launch empty = make({4, 0, 5}, 1);
  EXPECT_THAT(checkMessage(empty), HasSubstr("has shape [4, 0, 5]"));
  Launch badDim = make({4, 3, 5}, 3);
  EXPECT_THAT(checkMessage(badDim),
              HasSubstr("parameter 'dim' is 3, expected a value in [0, 2]"));
  Launch dtype = make({4, 3, 5}, 1, DType::kBF16);
  EXPECT_THAT(checkMessage(dtype),
              HasSubstr("output 0 (y) has dtype bf16, expected f32"));
  Launch rank("take_part");
  rank.inDesc({4, 6, 5}, DType::kI32).outDesc({4, 3}, DType::kI32);
  rank.param("dim", 1);
  EXPECT_THAT(checkMessage(rank), HasSubstr("expected rank 3"));
  Launch noDim("take_part");
  noDim.inDesc({4, 6}, DType::kI32).outDesc({4, 3}, DType::kI32);
  EXPECT_THAT(checkMessage(noDim),
              HasSubstr("missing integer parameter 'dim'"));
  noDim.param("dim", 1);
  EXPECT_TRUE(noDim.check().ok()) << noDim.check();
}

TEST(SequenceParallelChecks, StackAndUnstackParts) {
  auto make = [](const char *kernel, std::vector<int64_t> x,
                 std::vector<int64_t> y, int64_t dim) {
    Launch l(kernel);
    l.inDesc(std::move(x), DType::kBF16).outDesc(std::move(y), DType::kBF16);
    l.param("dim", dim);
    return l;
  };
  Launch ok = make("stack_parts", {2, 6, 5}, {6, 2, 5}, 1);
  EXPECT_TRUE(ok.check().ok()) << ok.check();
  Launch ok2 = make("unstack_parts", {6, 2, 5}, {2, 6, 5}, 1);
  EXPECT_TRUE(ok2.check().ok()) << ok2.check();
  Launch ok3 = make("stack_parts", {2, 3, 6}, {4, 3, 3}, 2);
  EXPECT_TRUE(ok3.check().ok()) << ok3.check();

  Launch dim0 = make("stack_parts", {2, 6, 5}, {4, 3, 5}, 0);
  EXPECT_THAT(checkMessage(dim0),
              HasSubstr("parameter 'dim' is 0, expected a value in [1, 2]"));
  // P = 3 from dimension 0, but 6 / 3 != 3.
  Launch inconsistent = make("stack_parts", {2, 6, 5}, {6, 3, 5}, 1);
  EXPECT_THAT(checkMessage(inconsistent),
              HasSubstr("stack_parts: output 0 (y) has shape [6, 3, 5], "
                        "expected [3 * 2, x[1] / 3, 5] for an integer P >= 1"));
  Launch notMultiple = make("stack_parts", {2, 6, 5}, {5, 2, 5}, 1);
  EXPECT_THAT(checkMessage(notMultiple), HasSubstr("has shape [5, 2, 5]"));
  Launch other = make("stack_parts", {2, 6, 5}, {4, 3, 4}, 1);
  EXPECT_THAT(checkMessage(other), HasSubstr("has shape [4, 3, 4]"));
  Launch inverse = make("unstack_parts", {6, 2, 5}, {2, 4, 5}, 1);
  EXPECT_THAT(checkMessage(inverse),
              HasSubstr("unstack_parts: output 0 (y) has shape [2, 4, 5], "
                        "expected [x[0] / 3, 3 * 2, 5]"));
  Launch rank1 = make("unstack_parts", {6}, {2}, 1);
  EXPECT_THAT(checkMessage(rank1), HasSubstr("expected rank 2 or more"));
}

TEST(SequenceParallelChecks, TpDim) {
  Launch d("dropout");
  d.inDesc({2, 4, 6}, DType::kF32).outDesc({2, 4, 6}, DType::kF32);
  d.paramF("p", 0.1).param("rng_offset", 0);
  for (int64_t dim : {-1, 0, 1, 2}) {
    d.param("tp_dim", dim);
    EXPECT_TRUE(d.check().ok()) << dim << ": " << d.check();
  }
  d.param("tp_dim", 3);
  EXPECT_THAT(checkMessage(d),
              HasSubstr("dropout: parameter 'tp_dim' is 3, expected -1 or a "
                        "dimension of input 0 (x) (rank 3) below 3"));
  d.param("tp_dim", -2);
  EXPECT_THAT(checkMessage(d), HasSubstr("parameter 'tp_dim' is -2"));

  Launch n("fused_add_rms_norm");
  n.inDesc({2, 4, 6}, DType::kF32).inDesc({2, 4, 6}, DType::kF32);
  n.inDesc({6}, DType::kF32);
  n.outDesc({2, 4, 6}, DType::kF32).outDesc({2, 4, 6}, DType::kF32);
  n.outDesc({2, 4}, DType::kF32).paramF("eps", 1e-5).paramF("p", 0.1);
  n.param("rng_offset", 1).param("tp_dim", 1);
  EXPECT_TRUE(n.check().ok()) << n.check();
  n.param("tp_dim", 2);
  EXPECT_THAT(checkMessage(n), HasSubstr("the norm reads whole rows of D"));

  Launch bda("fused_bias_dropout_add");
  bda.inDesc({2, 4, 6}, DType::kF32).inDesc({6}, DType::kF32);
  bda.inDesc({2, 4, 6}, DType::kF32).outDesc({2, 4, 6}, DType::kF32);
  bda.paramF("p", 0.1).param("rng_offset", 1).param("tp_dim", 2);
  EXPECT_TRUE(bda.check().ok()) << bda.check();
  bda.param("tp_dim", 3);
  EXPECT_FALSE(bda.check().ok());
}

} // namespace
} // namespace braid::test
