#include "runtime/train/ProgressLog.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  return line;
}

std::string formatJsonLine(const StepReport &r) {
  return absl::StrCat("{\"step\":", r.step, ",\"loss\":", jsonNumber(r.loss),
                      ",\"lr\":", jsonNumber(r.lr),
                      ",\"grad_norm\":", jsonNumber(r.gradNorm),
                      ",\"tokens_per_s\":", jsonNumber(r.tokensPerSecond), "}");
}

} // namespace braid
