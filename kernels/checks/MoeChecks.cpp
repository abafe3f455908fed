// Checks of the mixture-of-experts kernels (docs/kernels.md): the router's
// logits and scores [N, E], the chosen experts (i32) and their weights
// [N, K] with 1 <= K <= E, f32 in every plan; the permuted rows [N*K, D]
// of the tokens [..., D], in the tokens' storage; the experts' grouped
// GEMMs over those rows, weights [E, M, K].
#include <climits>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

constexpr const char *kWhy = "the router scores, chooses and weighs in f32 "
                             "in every plan";

// sigmoid and normalize (0 or 1) and a finite scale.
absl::Status checkRouteParams(const LaunchChecker &c) {
  BRAID_KERNEL_TRY(c.intParamOr("sigmoid", 0, 0, 1).status());
  BRAID_KERNEL_TRY(c.intParamOr("normalize", 0, 0, 1).status());
  return c.floatParamOr("scale", 1.0).status();
}

// `experts` is [..., K] i32 with K experts of the E there are, over the
// tokens of `rows` [..., E].
absl::Status checkChoice(const LaunchChecker &c, const Operand &experts,
                         const Operand &rows) {
  BRAID_KERNEL_TRY(c.dtype(experts, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(experts, 2, "[..., K]"));
  const int64_t k = experts.lastDim(), e = rows.lastDim();
  if (leadingDims(*experts.desc) != leadingDims(*rows.desc))
    return c.error(absl::StrCat(experts.label, " has shape ",
                                shapeString(experts.shape()), ", ", rows.label,
                                " ", shapeString(rows.shape()),
                                ": one row per token of both"));
  if (k < 1 || k > e)
    return c.error(absl::StrCat(experts.label, " chooses ", k,
                                " experts per row of the ", e, " of ",
                                rows.label, ": 1 to ", e));
  return absl::OkStatus();
}

// The router's choice (moe_route, moe_topk) from `rows` [..., E] (f32
// logits or scores) and the optional bias (input 1): `experts` and their
// `weights`.
absl::Status checkRouterChoice(const LaunchChecker &c, const Operand &rows,
                               const Operand &experts, const Operand &weights) {
  BRAID_KERNEL_TRY(c.f32(rows, kWhy));
  BRAID_KERNEL_TRY(c.minRank(rows, 2, "[..., E]"));
  if (c.numIns() > 1) {
    BRAID_KERNEL_TRY(c.f32(c.in(1), kWhy));
    BRAID_KERNEL_TRY(c.shape(c.in(1), {rows.lastDim()},
                             "(one bias per expert of input 0)"));
  }
  BRAID_KERNEL_TRY(checkChoice(c, experts, rows));
  BRAID_KERNEL_TRY(c.f32(weights, kWhy));
  return c.sameShape(weights, experts);
}

// The gradient through the choice (moe_route_grad, moe_topk_grad): the
// weights' gradient `dweights` of `experts` chosen from `scores` [..., E],
// and `result` (f32, the scores' shape).
absl::Status checkChoiceGrad(const LaunchChecker &c, const Operand &dweights,
                             const Operand &scores, const Operand &experts,
                             const Operand &result) {
  BRAID_KERNEL_TRY(c.f32(scores, kWhy));
  BRAID_KERNEL_TRY(c.minRank(scores, 2, "[..., E]"));
  BRAID_KERNEL_TRY(checkChoice(c, experts, scores));
  BRAID_KERNEL_TRY(c.f32(dweights, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(dweights, experts));
  BRAID_KERNEL_TRY(c.f32(result, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(result, scores));
  return checkRouteParams(c);
}

absl::Status checkMoeRoute(const KernelSignature &sig) {
  LaunchChecker c("moe_route", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "bias"}, 1));
  BRAID_KERNEL_TRY(c.outputs({"experts", "weights", "scores"}));
  BRAID_KERNEL_TRY(checkRouterChoice(c, c.in(0), c.out(0), c.out(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(2), kWhy));
  BRAID_KERNEL_TRY(c.sameShape(c.out(2), c.in(0)));
  return checkRouteParams(c);
}

absl::Status checkMoeRouteGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_route_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dweights", "scores", "experts", "dscores"}, 1));
  if (c.numIns() > 3) {
    BRAID_KERNEL_TRY(c.f32(c.in(3), kWhy));
    BRAID_KERNEL_TRY(c.sameShape(c.in(3), c.in(1)));
  }
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  return checkChoiceGrad(c, c.in(0), c.in(1), c.in(2), c.out(0));
}

// The tokens `x` [..., D] (float storage), their choices `positions`
// [..., K] (i32) with one row per token of x, and `rows` [N*K, D] of x's
// dtype.
// `rowCount` is the rows there must be (-1: any, as the positions of
// capacity mode index E * capacity rows).
absl::Status checkPermuted(const LaunchChecker &c, const Operand &x,
                           const Operand &positions, const Operand &rows,
                           int64_t rowCount = -1) {
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(c.minRank(x, 2, "[..., D]"));
  BRAID_KERNEL_TRY(c.dtype(positions, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(positions, 2, "[..., K]"));
  const int64_t d = x.lastDim(), n = d == 0 ? 0 : x.desc->numel() / d;
  const int64_t k = positions.lastDim();
  const int64_t rowsOfPositions = k == 0 ? 0 : positions.desc->numel() / k;
  if (rowsOfPositions != n)
    return c.error(absl::StrCat(positions.label, " has ", rowsOfPositions,
                                " rows, one per token of ", x.label, ": ", n));
  if (positions.desc->numel() > INT32_MAX)
    return c.error(absl::StrCat(positions.label, " has ",
                                positions.desc->numel(),
                                " choices, more than 2^31 - 1"));
  BRAID_KERNEL_TRY(c.sameDtype(rows, x));
  BRAID_KERNEL_TRY(c.rank(rows, 2, "[R, D]"));
  if (rows.dim(0) > INT32_MAX)
    return c.error(absl::StrCat(rows.label, " has ", rows.dim(0),
                                " rows, more than 2^31 - 1"));
  return c.shape(rows, {rowCount < 0 ? rows.dim(0) : rowCount, d},
                 rowCount < 0 ? "(rows of D)" : "(a row of D per slot)");
}

// The sort's results (moe_sort, moe_permute): a position per choice of
// `experts` (i32) and the offsets [E + 1] (i32) of at least one expert.
absl::Status checkSortOutputs(const LaunchChecker &c, const Operand &experts,
                              const Operand &positions,
                              const Operand &offsets) {
  BRAID_KERNEL_TRY(c.dtype(positions, DType::kI32));
  BRAID_KERNEL_TRY(c.sameShape(positions, experts));
  BRAID_KERNEL_TRY(c.dtype(offsets, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(offsets, 1, "[E + 1]"));
  if (offsets.dim(0) < 2)
    return c.error(absl::StrCat(offsets.label, " has ", offsets.dim(0),
                                " entries: one more than the experts, of "
                                "which there is at least one"));
  return absl::OkStatus();
}

absl::Status checkMoePermute(const KernelSignature &sig) {
  LaunchChecker c("moe_permute", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "experts"}));
  BRAID_KERNEL_TRY(c.outputs({"xs", "positions", "offsets"}));
  Operand x = c.in(0), experts = c.in(1), xs = c.out(0),
          positions = c.out(1), offsets = c.out(2);
  // Dropless: a row per choice; capacity mode: `capacity` per expert.
  const absl::StatusOr<int64_t> capacity =
      c.intParamOr("capacity", 0, 0, INT32_MAX);
  if (!capacity.ok())
    return capacity.status();
  const int64_t slots = *capacity > 0 && offsets.desc->shape.size() == 1
                            ? (offsets.dim(0) - 1) * *capacity
                            : experts.desc->numel();
  BRAID_KERNEL_TRY(checkPermuted(c, x, experts, xs, slots));
  return checkSortOutputs(c, experts, positions, offsets);
}

absl::Status checkMoePermuteGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_permute_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dxs", "positions"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  return checkPermuted(c, c.out(0), c.in(1), c.in(0));
}

absl::Status checkMoeUnpermute(const KernelSignature &sig) {
  LaunchChecker c("moe_unpermute", sig);
  BRAID_KERNEL_TRY(c.inputs({"ys", "positions", "weights"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(checkPermuted(c, c.out(0), c.in(1), c.in(0)));
  BRAID_KERNEL_TRY(c.f32(c.in(2), kWhy));
  return c.sameShape(c.in(2), c.in(1));
}

absl::Status checkMoeUnpermuteGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_unpermute_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "ys", "positions", "weights"}));
  BRAID_KERNEL_TRY(c.outputs({"dys", "dweights"}));
  BRAID_KERNEL_TRY(checkPermuted(c, c.in(0), c.in(2), c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.in(3), kWhy));
  BRAID_KERNEL_TRY(c.sameShape(c.in(3), c.in(2)));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(1)));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kWhy));
  return c.sameShape(c.out(1), c.in(2));
}

// The unfused router and permutations (docs/fusion.md).
absl::Status checkMoeScores(const KernelSignature &sig) {
  LaunchChecker c("moe_scores", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits"}));
  BRAID_KERNEL_TRY(c.outputs({"scores"}));
  BRAID_KERNEL_TRY(c.f32(c.in(0), kWhy));
  BRAID_KERNEL_TRY(c.minRank(c.in(0), 2, "[..., E]"));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), c.in(0)));
  return c.intParamOr("sigmoid", 0, 0, 1).status();
}

absl::Status checkMoeScoresGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_scores_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dscores", "scores"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  BRAID_KERNEL_TRY(c.f32(c.in(1), kWhy));
  BRAID_KERNEL_TRY(c.minRank(c.in(1), 2, "[..., E]"));
  for (const Operand &v : {c.in(0), c.out(0)}) {
    BRAID_KERNEL_TRY(c.f32(v, kWhy));
    BRAID_KERNEL_TRY(c.sameShape(v, c.in(1)));
  }
  return c.intParamOr("sigmoid", 0, 0, 1).status();
}

absl::Status checkMoeTopK(const KernelSignature &sig) {
  LaunchChecker c("moe_topk", sig);
  BRAID_KERNEL_TRY(c.inputs({"scores", "bias"}, 1));
  BRAID_KERNEL_TRY(c.outputs({"experts", "weights"}));
  BRAID_KERNEL_TRY(checkRouterChoice(c, c.in(0), c.out(0), c.out(1)));
  return checkRouteParams(c);
}

absl::Status checkMoeTopKGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_topk_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dweights", "scores", "experts"}));
  BRAID_KERNEL_TRY(c.outputs({"dscores"}));
  return checkChoiceGrad(c, c.in(0), c.in(1), c.in(2), c.out(0));
}

absl::Status checkMoeSort(const KernelSignature &sig) {
  LaunchChecker c("moe_sort", sig);
  BRAID_KERNEL_TRY(c.inputs({"experts"}));
  BRAID_KERNEL_TRY(c.outputs({"positions", "offsets"}));
  Operand experts = c.in(0);
  BRAID_KERNEL_TRY(c.dtype(experts, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(experts, 2, "[..., K]"));
  if (experts.desc->numel() > INT32_MAX)
    return c.error(absl::StrCat(experts.label, " has ",
                                experts.desc->numel(),
                                " choices, more than 2^31 - 1"));
  BRAID_KERNEL_TRY(checkSortOutputs(c, experts, c.out(0), c.out(1)));
  return c.intParamOr("capacity", 0, 0, INT32_MAX).status();
}

absl::Status checkMoeGather(const KernelSignature &sig) {
  LaunchChecker c("moe_gather", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "positions"}));
  BRAID_KERNEL_TRY(c.outputs({"xs"}));
  return checkPermuted(c, c.in(0), c.in(1), c.out(0));
}

// `choices` [..., K, D]: a row of `rows` [R, D] (float storage) per
// choice of `positions` [..., K] (i32), in the rows' dtype.
absl::Status checkChoiceRows(const LaunchChecker &c, const Operand &choices,
                             const Operand &rows, const Operand &positions) {
  BRAID_KERNEL_TRY(c.floatStorage(rows));
  BRAID_KERNEL_TRY(c.rank(rows, 2, "[R, D]"));
  BRAID_KERNEL_TRY(c.dtype(positions, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(positions, 2, "[..., K]"));
  BRAID_KERNEL_TRY(c.sameDtype(choices, rows));
  std::vector<int64_t> want = positions.shape();
  want.push_back(rows.lastDim());
  return c.shape(choices, want, "(a row of D per choice)");
}

absl::Status checkMoeGatherChoices(const KernelSignature &sig) {
  LaunchChecker c("moe_gather_choices", sig);
  BRAID_KERNEL_TRY(c.inputs({"ys", "positions"}));
  BRAID_KERNEL_TRY(c.outputs({"choices"}));
  return checkChoiceRows(c, c.out(0), c.in(0), c.in(1));
}

absl::Status checkMoeGatherChoicesGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_gather_choices_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dchoices", "positions"}));
  BRAID_KERNEL_TRY(c.outputs({"dys"}));
  return checkChoiceRows(c, c.in(0), c.out(0), c.in(1));
}

// `choices` [..., K, D] (float storage), `weights` [..., K] (f32) and a
// token tensor `y` [..., D] of the choices' dtype.
absl::Status checkWeightedSum(const LaunchChecker &c, const Operand &choices,
                              const Operand &weights, const Operand &y) {
  BRAID_KERNEL_TRY(c.floatStorage(choices));
  BRAID_KERNEL_TRY(c.minRank(choices, 3, "[..., K, D]"));
  std::vector<int64_t> want = choices.shape();
  const int64_t d = want.back();
  want.pop_back();
  BRAID_KERNEL_TRY(c.f32(weights, kWhy));
  BRAID_KERNEL_TRY(c.shape(weights, want, "(a weight per choice)"));
  want.back() = d;
  BRAID_KERNEL_TRY(c.sameDtype(y, choices));
  return c.shape(y, want, "(a row of D per token)");
}

absl::Status checkMoeWeightedSum(const KernelSignature &sig) {
  LaunchChecker c("moe_weighted_sum", sig);
  BRAID_KERNEL_TRY(c.inputs({"choices", "weights"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkWeightedSum(c, c.in(0), c.in(1), c.out(0));
}

absl::Status checkMoeWeightedSumGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_weighted_sum_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "choices", "weights"}));
  BRAID_KERNEL_TRY(c.outputs({"dchoices", "dweights"}));
  BRAID_KERNEL_TRY(checkWeightedSum(c, c.in(1), c.in(2), c.in(0)));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(1)));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kWhy));
  return c.sameShape(c.out(1), c.in(2));
}

// The experts' GEMMs: rows [R, ...] in the experts' blocks, at offsets
// [B + 1] (i32, input 2: moe_grouped_linear*, dropless; B a multiple of E,
// block g being expert g mod E's) or E equal blocks
// (moe_batched_linear*, capacity mode), a weight [E, M, K] of the rows'
// storage.
enum class Gemm { kForward, kGradInput, kGradWeight };

const char *expertGemm(bool grouped, Gemm which) {
  static constexpr const char *kNames[2][3] = {
      {"moe_batched_linear", "moe_batched_linear_grad_input",
       "moe_batched_linear_grad_weight"},
      {"moe_grouped_linear", "moe_grouped_linear_grad_input",
       "moe_grouped_linear_grad_weight"}};
  return kNames[grouped ? 1 : 0][static_cast<int>(which)];
}

// The blocks of `rows` over `experts` experts: the offsets' dtype and
// length, or rows that split evenly.
absl::Status checkBlocks(const LaunchChecker &c, bool grouped,
                         const Operand &rows, int64_t experts) {
  if (!grouped) {
    if (experts < 1 || rows.dim(0) % experts != 0)
      return c.error(absl::StrCat(rows.label, " has ", rows.dim(0),
                                  " rows, not a multiple of the ", experts,
                                  " experts' equal blocks"));
    return absl::OkStatus();
  }
  const Operand offsets = c.in(2);
  BRAID_KERNEL_TRY(c.dtype(offsets, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(offsets, 1, "[B + 1]"));
  const int64_t blocks = offsets.dim(0) - 1;
  if (experts < 1 || blocks < experts || blocks % experts != 0)
    return c.error(absl::StrCat(
        offsets.label, " has shape ", shapeString(offsets.shape()),
        ", expected one more than a multiple of the weight's ", experts,
        " experts (a block per expert, or per sending rank and expert)"));
  return absl::OkStatus();
}

// sgemm takes int sizes.
absl::Status checkFitsBlas(const LaunchChecker &c, int64_t rows, int64_t m,
                           int64_t k) {
  if (rows > INT_MAX || m > INT_MAX || k > INT_MAX)
    return c.error("the CPU GEMM takes at most 2^31 - 1 rows and columns");
  return absl::OkStatus();
}

// Rows [R, width] (x, or dy with `rowsAreInput` false) and the weight.
absl::Status checkRowsAndWeight(const LaunchChecker &c, bool grouped,
                                const Operand &rows, const Operand &w,
                                bool rowsAreInput) {
  BRAID_KERNEL_TRY(c.floatStorage(rows));
  BRAID_KERNEL_TRY(c.sameDtype(w, rows));
  BRAID_KERNEL_TRY(c.rank(rows, 2, rowsAreInput ? "[R, K]" : "[R, M]"));
  BRAID_KERNEL_TRY(c.rank(w, 3, "[E, M, K]"));
  const int64_t want = rowsAreInput ? w.dim(2) : w.dim(1);
  if (rows.lastDim() != want)
    return c.error(absl::StrCat(
        rows.label, " has shape ", shapeString(rows.shape()), ", expected [R, ",
        want, "] to match the weight ", shapeString(w.shape())));
  BRAID_KERNEL_TRY(checkBlocks(c, grouped, rows, w.dim(0)));
  return checkFitsBlas(c, rows.dim(0), w.dim(1), w.dim(2));
}

template <bool kGrouped>
absl::Status checkExpertLinear(const KernelSignature &sig) {
  LaunchChecker c(expertGemm(kGrouped, Gemm::kForward), sig);
  if (kGrouped)
    BRAID_KERNEL_TRY(c.inputs({"x", "weight", "offsets"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"x", "weight"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand x = c.in(0), w = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(checkRowsAndWeight(c, kGrouped, x, w, true));
  // Adaptive recompute's clone: computes only above these received rows.
  if (kGrouped)
    BRAID_KERNEL_TRY(
        c.intParamOr("recompute_above", -1, -1, x.dim(0)).status());
  BRAID_KERNEL_TRY(c.sameDtype(y, x));
  return c.shape(y, {x.dim(0), w.dim(1)}, "(x's rows, then weight's M)");
}

template <bool kGrouped>
absl::Status checkExpertLinearGradInput(const KernelSignature &sig) {
  LaunchChecker c(expertGemm(kGrouped, Gemm::kGradInput), sig);
  if (kGrouped)
    BRAID_KERNEL_TRY(c.inputs({"dy", "weight", "offsets"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"dy", "weight"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  Operand dy = c.in(0), w = c.in(1), dx = c.out(0);
  BRAID_KERNEL_TRY(checkRowsAndWeight(c, kGrouped, dy, w, false));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(c.sameDtype(dx, dy));
  return c.shape(dx, {dy.dim(0), w.dim(2)}, "(dy's rows, then weight's K)");
}

template <bool kGrouped>
absl::Status checkExpertLinearGradWeight(const KernelSignature &sig) {
  LaunchChecker c(expertGemm(kGrouped, Gemm::kGradWeight), sig);
  if (kGrouped)
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "offsets"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"dy", "x"}));
  BRAID_KERNEL_TRY(c.outputs({"dweight"}));
  Operand dy = c.in(0), x = c.in(1), dw = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(x, dy));
  BRAID_KERNEL_TRY(c.rank(dy, 2, "[R, M]"));
  BRAID_KERNEL_TRY(c.rank(x, 2, "[R, K]"));
  if (x.dim(0) != dy.dim(0))
    return c.error(absl::StrCat(x.label, " has ", x.dim(0), " rows, ",
                                dy.label, " ", dy.dim(0)));
  BRAID_KERNEL_TRY(c.gradWeightDtype(dw, dy));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(c.rank(dw, 3, "[E, M, K]"));
  BRAID_KERNEL_TRY(c.shape(dw, {dw.dim(0), dy.lastDim(), x.lastDim()},
                           "([E, dy's M, x's K])"));
  BRAID_KERNEL_TRY(checkBlocks(c, kGrouped, dy, dw.dim(0)));
  return checkFitsBlas(c, dy.dim(0), dy.lastDim(), x.lastDim());
}

// The balancing losses: rows [..., E] of f32 scores or logits.
absl::Status checkBalanceRows(const LaunchChecker &c, const Operand &rows) {
  BRAID_KERNEL_TRY(c.f32(rows, kWhy));
  BRAID_KERNEL_TRY(c.minRank(rows, 2, "[..., E]"));
  return c.floatParamOr("coeff", 0.0).status();
}

// counts [E] (f32), one per expert of `rows`.
absl::Status checkCounts(const LaunchChecker &c, const Operand &counts,
                         const Operand &rows) {
  BRAID_KERNEL_TRY(c.f32(counts, kWhy));
  return c.shape(counts, {rows.lastDim()}, "(one count per expert)");
}

absl::Status checkMoeExpertCounts(const KernelSignature &sig) {
  LaunchChecker c("moe_expert_counts", sig);
  BRAID_KERNEL_TRY(c.inputs({"experts"}));
  BRAID_KERNEL_TRY(c.outputs({"counts"}));
  BRAID_KERNEL_TRY(c.dtype(c.in(0), DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(c.in(0), 1, "[..., K]"));
  // f32 counts are exact up to 2^24.
  if (c.in(0).desc->numel() > (int64_t{1} << 24))
    return c.error(absl::StrCat("input 0 (experts) holds ",
                                c.in(0).desc->numel(),
                                " choices; f32 counts are exact up to 2^24"));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  BRAID_KERNEL_TRY(c.rank(c.out(0), 1, "[E]"));
  if (c.out(0).dim(0) < 1)
    return c.error("output 0 (counts) has no expert");
  return absl::OkStatus();
}

// moe_aux_loss and its gradient: scores, counts; top_k, sigmoid and the
// sequence's parts (context parallel).
absl::Status checkAux(LaunchChecker &c) {
  BRAID_KERNEL_TRY(c.inputs({"scores", "counts"}));
  BRAID_KERNEL_TRY(checkBalanceRows(c, c.in(0)));
  BRAID_KERNEL_TRY(checkCounts(c, c.in(1), c.in(0)));
  BRAID_KERNEL_TRY(c.intParamOr("sigmoid", 0, 0, 1).status());
  BRAID_KERNEL_TRY(c.intParamOr("parts", 1, 1, 1 << 20).status());
  return c.intParamOr("top_k", 1, 1, c.in(0).lastDim()).status();
}

absl::Status checkMoeAuxLoss(const KernelSignature &sig) {
  LaunchChecker c("moe_aux_loss", sig);
  BRAID_KERNEL_TRY(checkAux(c));
  BRAID_KERNEL_TRY(c.outputs({"loss"}));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  return c.rank(c.out(0), 0, "[] (a scalar)");
}

absl::Status checkMoeAuxLossGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_aux_loss_grad", sig);
  BRAID_KERNEL_TRY(checkAux(c));
  BRAID_KERNEL_TRY(c.outputs({"dscores"}));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), c.in(0)));
  return c.floatParamOr("scale", 1.0).status();
}

absl::Status checkMoeBiasUpdate(const KernelSignature &sig) {
  LaunchChecker c("moe_bias_update", sig);
  BRAID_KERNEL_TRY(c.inputs({"load", "skip"}));
  BRAID_KERNEL_TRY(c.outputs({"bias"}));
  BRAID_KERNEL_TRY(c.allF32(kWhy));
  BRAID_KERNEL_TRY(c.rank(c.out(0), 1, "[E]"));
  BRAID_KERNEL_TRY(c.sameShape(c.in(0), c.out(0)));
  BRAID_KERNEL_TRY(c.rank(c.in(1), 0, "[] (the step_skipped flag)"));
  BRAID_KERNEL_TRY(c.floatParamOr("rate", 0.0).status());
  return absl::OkStatus();
}

absl::Status checkMoeZLoss(const KernelSignature &sig) {
  LaunchChecker c("moe_z_loss", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits"}));
  BRAID_KERNEL_TRY(c.outputs({"loss"}));
  BRAID_KERNEL_TRY(checkBalanceRows(c, c.in(0)));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  return c.rank(c.out(0), 0, "[] (a scalar)");
}

absl::Status checkMoeZLossGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_z_loss_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  BRAID_KERNEL_TRY(checkBalanceRows(c, c.in(0)));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kWhy));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), c.in(0)));
  return c.floatParamOr("scale", 1.0).status();
}

// Offsets [B + 1] (i32) in, each block's rows [B] (i32) out.
absl::Status checkMoeBlockCounts(const KernelSignature &sig) {
  LaunchChecker c("moe_block_counts", sig);
  BRAID_KERNEL_TRY(c.inputs({"offsets"}));
  BRAID_KERNEL_TRY(c.outputs({"counts"}));
  BRAID_KERNEL_TRY(c.dtype(c.in(0), DType::kI32));
  BRAID_KERNEL_TRY(c.rank(c.in(0), 1, "[B + 1]"));
  BRAID_KERNEL_TRY(c.dtype(c.out(0), DType::kI32));
  return c.shape(c.out(0), {c.in(0).dim(0) - 1},
                 "(one count per block of the offsets)");
}

// The EP group's gathered counts [G x G x m] (i32) in, the offsets of the
// G x m blocks this rank receives [G x m + 1] (i32) out.
absl::Status checkMoeEpOffsets(const KernelSignature &sig) {
  LaunchChecker c("moe_ep_offsets", sig);
  BRAID_KERNEL_TRY(c.inputs({"counts"}));
  BRAID_KERNEL_TRY(c.outputs({"offsets"}));
  BRAID_KERNEL_TRY(c.dtype(c.in(0), DType::kI32));
  BRAID_KERNEL_TRY(c.dtype(c.out(0), DType::kI32));
  BRAID_KERNEL_TRY(c.rank(c.out(0), 1, "[G x m + 1]"));
  const int64_t blocks = c.out(0).dim(0) - 1;
  const int64_t n = c.in(0).desc->numel();
  const int64_t ranks = blocks > 0 ? n / blocks : 0;
  if (blocks < 1 || n % blocks != 0 || ranks < 1 || blocks % ranks != 0)
    return c.error(absl::StrCat(
        "input 0 (counts) holds ", n, " counts and output 0 (offsets) ",
        blocks + 1, "; expected G x G x m counts and G x m + 1 offsets for an "
        "expert-parallel group of G ranks with m experts each"));
  return absl::OkStatus();
}

// Adaptive recompute's copies: rows [R, F] (float storage), kept rows
// [K, F] of the same dtype with K from 1 to R, and the offsets [B + 1]
// (i32) whose last entry says how many rows were received.
absl::Status checkKeptRows(const LaunchChecker &c, const Operand &rows,
                           const Operand &kept, const Operand &offsets) {
  BRAID_KERNEL_TRY(c.floatStorage(rows));
  BRAID_KERNEL_TRY(c.rank(rows, 2, "[R, F]"));
  BRAID_KERNEL_TRY(c.sameDtype(kept, rows));
  BRAID_KERNEL_TRY(c.rank(kept, 2, "[K, F]"));
  if (kept.dim(0) < 1 || kept.dim(0) > rows.dim(0) ||
      kept.lastDim() != rows.lastDim())
    return c.error(absl::StrCat(
        kept.label, " has shape ", shapeString(kept.shape()), ", expected 1 to ",
        rows.dim(0), " rows of ", rows.label, "'s width ", rows.lastDim()));
  BRAID_KERNEL_TRY(c.dtype(offsets, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(offsets, 1, "[B + 1]"));
  if (offsets.dim(0) < 2)
    return c.error(absl::StrCat(offsets.label,
                                " has no block; expected [B + 1], B >= 1"));
  return absl::OkStatus();
}

absl::Status checkMoeKeepRows(const KernelSignature &sig) {
  LaunchChecker c("moe_keep_rows", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "offsets"}));
  BRAID_KERNEL_TRY(c.outputs({"kept"}));
  return checkKeptRows(c, c.in(0), c.out(0), c.in(1));
}

absl::Status checkMoeRestoreRows(const KernelSignature &sig) {
  LaunchChecker c("moe_restore_rows", sig);
  BRAID_KERNEL_TRY(c.inputs({"kept", "offsets"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkKeptRows(c, c.out(0), c.in(0), c.in(1));
}

// Hot-expert replication (docs/moe.md). moe_hot_experts: the EP group's
// gathered counts [G * E] (i32) with G = `ranks` dividing E, a threshold of
// at least 1, the hot experts [H] (i32) and the cold counts, shaped as the
// counts.
absl::Status checkMoeHotExperts(const KernelSignature &sig) {
  LaunchChecker c("moe_hot_experts", sig);
  BRAID_KERNEL_TRY(c.inputs({"counts"}));
  BRAID_KERNEL_TRY(c.outputs({"hot", "cold"}));
  Operand counts = c.in(0), hot = c.out(0), cold = c.out(1);
  BRAID_KERNEL_TRY(c.dtype(counts, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(counts, 1, "[G x E]"));
  const absl::StatusOr<int64_t> ranks = c.intParam("ranks", 1, INT32_MAX);
  if (!ranks.ok())
    return ranks.status();
  const int64_t n = counts.desc->numel();
  if (n < 1 || n % *ranks != 0 || n / *ranks % *ranks != 0)
    return c.error(absl::StrCat(
        counts.label, " holds ", n, " counts; expected G x E with E a "
        "multiple of G = ", *ranks, " ('ranks', the expert-parallel group)"));
  const absl::StatusOr<double> threshold = c.floatParam("threshold");
  if (!threshold.ok())
    return threshold.status();
  if (!(*threshold >= 1.0))
    return c.error(absl::StrCat("parameter 'threshold' is ", *threshold,
                                ", expected at least 1 (a multiple of the "
                                "mean load)"));
  BRAID_KERNEL_TRY(c.dtype(hot, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(hot, 1, "[H]"));
  if (hot.dim(0) < 1)
    return c.error(absl::StrCat(hot.label, " has no slot; expected [H], "
                                "H >= 1"));
  BRAID_KERNEL_TRY(c.dtype(cold, DType::kI32));
  return c.sameShape(cold, counts);
}

// moe_split_rows and moe_merge_rows: a rank's permuted rows `rows` [N, D]
// (float storage), the cold rows of the same shape and dtype, the hot rows
// [Nh, D] (Nh >= 1) of the same dtype, the experts' offsets [E + 1] (i32)
// and the hot experts [H] (i32).
absl::Status checkSplitRows(const LaunchChecker &c, const Operand &rows,
                            const Operand &cold, const Operand &hotRows,
                            const Operand &offsets, const Operand &hot) {
  BRAID_KERNEL_TRY(c.floatStorage(rows));
  BRAID_KERNEL_TRY(c.rank(rows, 2, "[N, D]"));
  if (rows.dim(0) > INT32_MAX)
    return c.error(absl::StrCat(rows.label, " has ", rows.dim(0),
                                " rows, more than 2^31 - 1"));
  BRAID_KERNEL_TRY(c.sameDtype(cold, rows));
  BRAID_KERNEL_TRY(c.sameShape(cold, rows));
  BRAID_KERNEL_TRY(c.sameDtype(hotRows, rows));
  BRAID_KERNEL_TRY(c.rank(hotRows, 2, "[Nh, D]"));
  if (hotRows.dim(0) < 1 || hotRows.dim(0) > INT32_MAX ||
      hotRows.lastDim() != rows.lastDim())
    return c.error(absl::StrCat(
        hotRows.label, " has shape ", shapeString(hotRows.shape()),
        ", expected 1 to 2^31 - 1 rows of ", rows.label, "'s width ",
        rows.lastDim()));
  BRAID_KERNEL_TRY(c.dtype(offsets, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(offsets, 1, "[E + 1]"));
  if (offsets.dim(0) < 2)
    return c.error(absl::StrCat(offsets.label,
                                " has no expert; expected [E + 1], E >= 1"));
  BRAID_KERNEL_TRY(c.dtype(hot, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(hot, 1, "[H]"));
  if (hot.dim(0) < 1)
    return c.error(absl::StrCat(hot.label, " has no slot; expected [H], "
                                "H >= 1"));
  return absl::OkStatus();
}

absl::Status checkMoeSplitRows(const KernelSignature &sig) {
  LaunchChecker c("moe_split_rows", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "offsets", "hot"}));
  BRAID_KERNEL_TRY(c.outputs({"cold", "hot_rows", "hot_offsets"}));
  BRAID_KERNEL_TRY(
      checkSplitRows(c, c.in(0), c.out(0), c.out(1), c.in(1), c.in(2)));
  BRAID_KERNEL_TRY(c.dtype(c.out(2), DType::kI32));
  return c.shape(c.out(2), {c.in(2).dim(0) + 1},
                 "(one more than the slots of input 2 (hot))");
}

absl::Status checkMoeMergeRows(const KernelSignature &sig) {
  LaunchChecker c("moe_merge_rows", sig);
  BRAID_KERNEL_TRY(c.inputs({"cold", "hot_rows", "offsets", "hot"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSplitRows(c, c.out(0), c.in(0), c.in(1), c.in(2), c.in(3));
}

// Sub-units: `whole` [B, S, X] and the launch's other operands, its P >= 2
// parts [B, S / P, X] along the sequence, all of one dtype (f32, bf16 or
// the router's i32 choices).
absl::Status checkTokenParts(const LaunchChecker &c, const Operand &whole,
                             bool split) {
  const int parts = split ? c.numOuts() : c.numIns();
  if (parts < 2)
    return c.error(absl::StrCat("needs at least two parts, got ", parts));
  BRAID_KERNEL_TRY(c.rank(whole, 3, "[B, S, X]"));
  if (whole.desc->dtype != DType::kI32)
    BRAID_KERNEL_TRY(c.floatStorage(whole));
  if (whole.dim(1) % parts != 0)
    return c.error(absl::StrCat(whole.label, " has a sequence of ",
                                whole.dim(1), ", which ", parts,
                                " parts do not divide"));
  std::vector<int64_t> want = whole.shape();
  want[1] /= parts;
  for (int i = 0; i < parts; ++i) {
    const Operand part = split ? c.out(i) : c.in(i);
    if (part.desc->dtype != whole.desc->dtype)
      return c.error(absl::StrCat(
          part.label, " has dtype ", toAbsl(dtypeName(part.desc->dtype)),
          ", expected ", toAbsl(dtypeName(whole.desc->dtype)),
          ", the dtype of ", whole.label));
    BRAID_KERNEL_TRY(c.shape(part, want, "(an equal part of the sequence)"));
  }
  return absl::OkStatus();
}

absl::Status checkMoeSplitTokens(const KernelSignature &sig) {
  LaunchChecker c("moe_split_tokens", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.variadicOutputs("part"));
  return checkTokenParts(c, c.in(0), /*split=*/true);
}

absl::Status checkMoeJoinTokens(const KernelSignature &sig) {
  LaunchChecker c("moe_join_tokens", sig);
  BRAID_KERNEL_TRY(c.variadicInputs("part"));
  BRAID_KERNEL_TRY(c.outputs({"x"}));
  return checkTokenParts(c, c.out(0), /*split=*/false);
}

} // namespace

absl::Span<const NamedCheck> moeChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"moe_route", checkMoeRoute},
      {"moe_route_grad", checkMoeRouteGrad},
      {"moe_scores", checkMoeScores},
      {"moe_scores_grad", checkMoeScoresGrad},
      {"moe_topk", checkMoeTopK},
      {"moe_topk_grad", checkMoeTopKGrad},
      {"moe_sort", checkMoeSort},
      {"moe_gather", checkMoeGather},
      {"moe_gather_choices", checkMoeGatherChoices},
      {"moe_gather_choices_grad", checkMoeGatherChoicesGrad},
      {"moe_weighted_sum", checkMoeWeightedSum},
      {"moe_weighted_sum_grad", checkMoeWeightedSumGrad},
      {"moe_expert_counts", checkMoeExpertCounts},
      {"moe_block_counts", checkMoeBlockCounts},
      {"moe_ep_offsets", checkMoeEpOffsets},
      {"moe_keep_rows", checkMoeKeepRows},
      {"moe_restore_rows", checkMoeRestoreRows},
      {"moe_hot_experts", checkMoeHotExperts},
      {"moe_split_tokens", checkMoeSplitTokens},
      {"moe_join_tokens", checkMoeJoinTokens},
      {"moe_split_rows", checkMoeSplitRows},
      {"moe_merge_rows", checkMoeMergeRows},
      {"moe_aux_loss", checkMoeAuxLoss},
      {"moe_aux_loss_grad", checkMoeAuxLossGrad},
      {"moe_z_loss", checkMoeZLoss},
      {"moe_bias_update", checkMoeBiasUpdate},
      {"moe_z_loss_grad", checkMoeZLossGrad},
      {"moe_permute", checkMoePermute},
      {"moe_permute_grad", checkMoePermuteGrad},
      {"moe_unpermute", checkMoeUnpermute},
      {"moe_unpermute_grad", checkMoeUnpermuteGrad},
      {"moe_grouped_linear", checkExpertLinear<true>},
      {"moe_grouped_linear_grad_input", checkExpertLinearGradInput<true>},
      {"moe_grouped_linear_grad_weight", checkExpertLinearGradWeight<true>},
      {"moe_batched_linear", checkExpertLinear<false>},
      {"moe_batched_linear_grad_input", checkExpertLinearGradInput<false>},
      {"moe_batched_linear_grad_weight", checkExpertLinearGradWeight<false>},
  };
  return kChecks;
}

} // namespace braid::checks
