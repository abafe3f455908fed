// "Did you mean ...?" for misspelt field and enum names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

// Levenshtein distance between `a` and `b`, ignoring ASCII case, so that
// `Vocab_Size` matches vocab_size exactly. Only the first 64 characters of
// each string are compared, which bounds the cost on hostile input.
int editDistance(std::string_view a, std::string_view b);

// The candidate closest to `name` when it is close enough to be a likely
// misspelling: at most 1 edit for short names, and at most a third of the
// name's length for longer ones. Ties go to the earlier candidate.
std::optional<std::string>
closestName(std::string_view name, const std::vector<std::string> &candidates);

} // namespace braid
