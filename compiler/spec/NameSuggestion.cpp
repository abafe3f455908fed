#include "compiler/spec/NameSuggestion.h"

#include <algorithm>

namespace braid {
namespace {

constexpr size_t kMaxCompared = 64;

char lower(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

} // namespace

int editDistance(std::string_view a, std::string_view b) {
  a = a.substr(0, kMaxCompared);
  b = b.substr(0, kMaxCompared);
  // One row of the dynamic-programming table at a time.
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::optional<std::string>
closestName(std::string_view name, const std::vector<std::string> &candidates) {
  int allowed = std::max<int>(1, static_cast<int>(name.size()) / 3);
  std::optional<std::string> best;
  int bestDistance = allowed + 1;
  for (const std::string &candidate : candidates) {
    int distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

} // namespace braid
