#include "runtime/train/ProgressLog.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/train/HumanUnits.h"

namespace braid {
namespace {

std::string jsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "null";
}

} // namespace

std::string formatProgressLine(const StepReport &r) {
  const int width = std::max<int>(4, absl::StrCat(r.totalSteps).size());
  std::string line = absl::StrFormat(
      "step %*d/%d | loss %.4f | lr %.2e | grad_norm %.3f | %s tok/s", width,
      r.step, r.totalSteps, r.loss, r.lr, r.gradNorm,
      humanCount(r.tokensPerSecond));
  if (r.mfu >= 0)
    absl::StrAppend(&line, absl::StrFormat(" | MFU %.1f%%", 100 * r.mfu));
  absl::StrAppend(&line, " | ETA ", humanDuration(r.etaSeconds));
  if (r.skipped)
    absl::StrAppend(&line, " | skipped: not finite");
  return line;
}

std::string formatJsonLine(const StepReport &r) {
  std::string moe;
  if (!r.activationsRecomputed.empty())
    moe = absl::StrCat(",\"experts_recomputed\":[",
                       absl::StrJoin(r.activationsRecomputed, ","), "]");
  if (!r.passesReplicated.empty())
    absl::StrAppend(&moe, ",\"experts_replicated\":[",
                    absl::StrJoin(r.passesReplicated, ","), "]");
  return absl::StrCat("{\"step\":", r.step, ",\"loss\":", jsonNumber(r.loss),
                      ",\"lr\":", jsonNumber(r.lr),
                      ",\"grad_norm\":", jsonNumber(r.gradNorm),
                      ",\"tokens_per_s\":", jsonNumber(r.tokensPerSecond),
                      moe, r.skipped ? ",\"skipped\":true}" : "}");
}

namespace {

// "rank 0: 2 of 4, rank 1: 0 of 4" for each rank's `some` of `all` (ranks
// whose `all` is 0, without MoE layers, left out; at most 8 named).
std::string perRank(const std::vector<int64_t> &some,
                    const std::vector<int64_t> &all) {
  constexpr size_t kNamed = 8;
  std::vector<std::string> parts;
  size_t unnamed = 0;
  for (size_t rank = 0; rank < some.size() && rank < all.size(); ++rank) {
    if (all[rank] == 0)
      continue;
    if (parts.size() == kNamed)
      ++unnamed;
    else
      parts.push_back(
          absl::StrCat("rank ", rank, ": ", some[rank], " of ", all[rank]));
  }
  std::string text = absl::StrJoin(parts, ", ");
  if (unnamed > 0)
    absl::StrAppend(&text, " (and ", unnamed, " more ranks)");
  return text;
}

} // namespace

std::string formatAdaptiveRecompute(const StepReport &r) {
  std::vector<int64_t> all(r.activationsRecomputed);
  for (size_t rank = 0; rank < all.size() && rank < r.activationsKept.size();
       ++rank)
    all[rank] += r.activationsKept[rank];
  return absl::StrCat("adaptive recompute at step ", r.step,
                      ": expert activations recomputed on ",
                      perRank(r.activationsRecomputed, all));
}

std::string formatReplication(const StepReport &r) {
  return absl::StrCat("hot-expert replication at step ", r.step,
                      ": on in MoE layer passes on ",
                      perRank(r.passesReplicated, r.moePasses));
}

std::string logLinesThrough(std::string_view text, int64_t step) {
  std::string kept;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    int64_t n;
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "{\"step\":") || !absl::EndsWith(line, "}"))
      continue;
    absl::string_view digits = rest.substr(0, rest.find(','));
    if (absl::SimpleAtoi(digits, &n) && n >= 1 && n <= step)
      absl::StrAppend(&kept, line, "\n");
  }
  return kept;
}

} // namespace braid
