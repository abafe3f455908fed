#include "runtime/profile/KernelProfile.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace braid {

void KernelProfile::add(std::string_view kernel, double seconds) {
  for (Entry &e : entries_)
    if (e.kernel == kernel) {
      ++e.launches;
      e.seconds += seconds;
      return;
    }
  entries_.push_back({std::string(kernel), 1, seconds});
}

std::vector<KernelProfile::Entry> KernelProfile::sorted() const {
  std::vector<Entry> out = entries_;
  std::stable_sort(out.begin(), out.end(), [](const Entry &a, const Entry &b) {
    return a.seconds > b.seconds;
  });
  return out;
}

double KernelProfile::totalSeconds() const {
  double total = 0;
  for (const Entry &e : entries_)
    total += e.seconds;
  return total;
}

std::string KernelProfile::format(int64_t steps) const {
  double total = totalSeconds();
  int64_t perStep = std::max<int64_t>(steps, 1);
  std::string out = absl::StrFormat("%-28s %9s %11s %11s %7s\n", "kernel",
                                    "launches", "total ms", "ms/step", "share");
  for (const Entry &e : sorted())
    absl::StrAppendFormat(&out, "%-28s %9d %11.2f %11.3f %6.1f%%\n", e.kernel,
                          e.launches, 1e3 * e.seconds,
                          1e3 * e.seconds / perStep,
                          total > 0 ? 100 * e.seconds / total : 0.0);
  absl::StrAppendFormat(&out, "%-28s %9s %11.2f %11.3f\n", "all kernels", "",
                        1e3 * total, 1e3 * total / perStep);
  return out;
}

}  // namespace braid
