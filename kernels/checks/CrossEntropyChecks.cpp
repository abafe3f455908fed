// Checks of cross_entropy, cross_entropy_grad_input and the two halves of
// the vocabulary-parallel forward, cross_entropy_stats and
// cross_entropy_combine.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkLogitsAndLabels(const LaunchChecker &c, const Operand &logits,
                                  const Operand &labels) {
  BRAID_KERNEL_TRY(c.floatStorage(logits));
  BRAID_KERNEL_TRY(c.dtype(labels, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(logits, 1, "[..., V]"));
  if (logits.lastDim() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                "; the vocabulary V must not be empty"));
  if (logits.desc->rows() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                " with no rows; the mean loss of no tokens is "
                                "undefined"));
  return c.shape(labels, leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

absl::Status checkCrossEntropy(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "lse"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(0), "the loss stays f32 in every plan"));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return c.shape(c.out(1), leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

absl::Status checkCrossEntropyGradInput(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels", "lse"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.in(2), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.in(2), leadingDims(*logits.desc),
                           "(the leading dimensions of logits)"));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), logits));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), logits));
  // vocab_shard: the logits are a TP rank's vocabulary shard and lse the
  // whole vocabulary's (cross_entropy_combine).
  BRAID_KERNEL_TRY(c.intParamOr("vocab_shard", 0, 0, 1).status());
  return c.floatParam("scale").status();
}

// logits [..., V] of this TP rank's vocabulary shard and labels [...] ->
// stats [..., 3] f32.
absl::Status checkCrossEntropyStats(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy_stats", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"stats"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kStatistics));
  return c.shape(c.out(0), withLastDim(*logits.desc, 3),
                 "(the leading dimensions of logits, then 3)");
}

// stats_all [P * d0, d1, ..., 3] (the TP group's stats stacked along
// dimension 0 in rank order) and labels [d0, d1, ...] -> loss [] and
// lse [d0, d1, ...].
absl::Status checkCrossEntropyCombine(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy_combine", sig);
  BRAID_KERNEL_TRY(c.inputs({"stats_all", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "lse"}));
  Operand stats = c.in(0), labels = c.in(1);
  BRAID_KERNEL_TRY(c.f32(stats, kStatistics));
  BRAID_KERNEL_TRY(c.dtype(labels, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(labels, 1, "[d0, ...]"));
  if (labels.desc->numel() == 0)
    return c.error(absl::StrCat(labels.label, " has shape ",
                                shapeString(labels.shape()),
                                " with no rows; the mean loss of no tokens is "
                                "undefined"));
  const int64_t d0 = labels.dim(0);
  BRAID_KERNEL_TRY(c.rank(stats, labels.rank() + 1, "[P * d0, ..., 3]"));
  if (stats.dim(0) % d0 != 0 || stats.dim(0) == 0)
    return c.error(absl::StrCat(stats.label, " has shape ",
                                shapeString(stats.shape()),
                                "; its first dimension must be a positive "
                                "multiple P of the labels' first, ",
                                d0));
  std::vector<int64_t> want = labels.shape();
  want[0] = stats.dim(0);
  want.push_back(3);
  BRAID_KERNEL_TRY(c.shape(stats, want,
                           "(P stacked stats of the labels' shape, then 3)"));
  BRAID_KERNEL_TRY(c.f32(c.out(0), "the loss stays f32 in every plan"));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return c.shape(c.out(1), labels.shape(), "(the shape of labels)");
}

} // namespace

absl::Span<const NamedCheck> crossEntropyChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"cross_entropy", checkCrossEntropy},
      {"cross_entropy_grad_input", checkCrossEntropyGradInput},
      {"cross_entropy_stats", checkCrossEntropyStats},
      {"cross_entropy_combine", checkCrossEntropyCombine},
  };
  return kChecks;
}

} // namespace braid::checks
