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
  std::string recomputed;
  if (!r.activationsRecomputed.empty())
    recomputed = absl::StrCat(",\"experts_recomputed\":[",
                              absl::StrJoin(r.activationsRecomputed, ","), "]");
  return absl::StrCat("{\"step\":", r.step, ",\"loss\":", jsonNumber(r.loss),
                      ",\"lr\":", jsonNumber(r.lr),
                      ",\"grad_norm\":", jsonNumber(r.gradNorm),
                      ",\"tokens_per_s\":", jsonNumber(r.tokensPerSecond),
                      recomputed, r.skipped ? ",\"skipped\":true}" : "}");
}

std::string formatAdaptiveRecompute(const StepReport &r) {
  constexpr size_t kNamed = 8;
  std::vector<std::string> parts;
  size_t unnamed = 0;
  for (size_t rank = 0; rank < r.activationsRecomputed.size(); ++rank) {
    const int64_t again = r.activationsRecomputed[rank];
    const int64_t all =
        again + (rank < r.activationsKept.size() ? r.activationsKept[rank] : 0);
    if (all == 0)
      continue; // a pipeline rank without MoE layers
    if (parts.size() == kNamed)
      ++unnamed;
    else
      parts.push_back(absl::StrCat("rank ", rank, ": ", again, " of ", all));
  }
  std::string line = absl::StrCat("adaptive recompute at step ", r.step,
                                   ": expert activations recomputed on ",
                                   absl::StrJoin(parts, ", "));
  if (unnamed > 0)
    absl::StrAppend(&line, " (and ", unnamed, " more ranks)");
  return line;
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
