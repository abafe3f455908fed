#include "runtime/train/HumanUnits.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace braid {
namespace {

// Three significant digits for 1 <= v < 1000.
std::string threeDigits(double v) {
  if (v < 10)
    return absl::StrFormat("%.2f", v);
  if (v < 100)
    return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.0f", v);
}

} // namespace

std::string humanBytes(uint64_t bytes) {
  static const char *const kUnits[] = {"KiB", "MiB", "GiB",
                                       "TiB", "PiB", "EiB"};
  if (bytes < 1024)
    return absl::StrFormat("%d B", bytes);
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  // Stay below 1000 so that three digits suffice ("1000 KiB" reads as 0.98
  // MiB instead).
  while (v >= 1000 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  return absl::StrCat(threeDigits(v), " ", kUnits[unit]);
}

std::string humanCount(double value) {
  static const char *const kSuffix[] = {"", "k", "M", "G", "T", "P"};
  if (!std::isfinite(value))
    return "-";
  if (value < 1000)
    return absl::StrFormat("%.0f", value);
  int unit = 0;
  while (value >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  return absl::StrCat(threeDigits(value), kSuffix[unit]);
}

std::string humanDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9)
    return "-:--:--";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
}

} // namespace braid
