#include "compiler/spec/RuleChecks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/spec/SpecSchema.h"

namespace braid {

std::string formatFloat(double value) { return absl::StrFormat("%g", value); }

bool checkRequiredCount(int64_t value, const std::string &path,
                        const std::string &what, RuleSink &sink) {
  if (value > 0)
    return true;
  if (value == 0 && !sink.written(path))
    sink.report(path, absl::StrCat("missing; set ", what));
  else
    sink.report(path, absl::StrCat(value, " is not positive; set ", what));
  return false;
}

bool checkFloat(double value, FloatRange range, const std::string &path,
                const std::string &advice, RuleSink &sink) {
  std::string shown = formatFloat(value);
  if (!std::isfinite(value)) {
    sink.report(path, absl::StrCat(shown, " is not a finite number; ", advice));
    return false;
  }
  // Kernels compute in fp32, so the value must survive the conversion.
  const float single = static_cast<float>(value);
  if (!std::isfinite(single)) {
    sink.report(path, absl::StrCat(shown, " is beyond the range of fp32 "
                                          "(about 3.4e+38); ",
                                   advice));
    return false;
  }
  if (value != 0 && single == 0) {
    sink.report(path, absl::StrCat(shown, " is too small for fp32 (it "
                                          "rounds to 0); ",
                                   advice));
    return false;
  }
  switch (range) {
  case FloatRange::kPositive:
    if (value > 0)
      return true;
    sink.report(path, absl::StrCat(shown, " is not positive; ", advice));
    return false;
  case FloatRange::kNonNegative:
    if (value >= 0)
      return true;
    sink.report(path, absl::StrCat(shown, " is negative; ", advice));
    return false;
  case FloatRange::kFraction:
    if (value >= 0 && value < 1)
      return true;
    sink.report(path, absl::StrCat(shown, " is outside [0, 1); ", advice));
    return false;
  }
  return false;
}

bool checkEnumSet(int value, const google::protobuf::EnumDescriptor *type,
                  const std::string &path, RuleSink &sink) {
  if (value != 0 && type->FindValueByNumber(value))
    return true;
  std::string allowed = joinWithOr(allowedEnumNames(type));
  if (value == 0 && sink.written(path))
    sink.report(path, absl::StrCat(type->FindValueByNumber(0)->name(),
                                   " means not set; write ", allowed));
  else if (value == 0)
    sink.report(path, absl::StrCat("missing; write ", allowed));
  else
    sink.report(path, absl::StrCat(value, " is not a valid ", type->name(),
                                   "; write ", allowed));
  return false;
}

std::vector<int64_t> nearbyChoices(int64_t target, int64_t limit,
                                   const std::function<bool(int64_t)> &accept) {
  constexpr int64_t kMaxSteps = 1 << 16;
  std::vector<int64_t> found;
  if (target < 1 || limit < 1)
    return found;
  for (int64_t step = 1; step <= kMaxSteps && target - step >= 1; ++step) {
    if (target - step <= limit && accept(target - step)) {
      found.push_back(target - step);
      break;
    }
  }
  for (int64_t step = 1; step <= kMaxSteps && target < limit - step + 1;
       ++step) {
    if (accept(target + step)) {
      found.push_back(target + step);
      break;
    }
  }
  return found;
}

std::string formatChoices(const std::vector<int64_t> &choices) {
  std::vector<std::string> items;
  for (int64_t choice : choices)
    items.push_back(absl::StrCat(choice));
  return joinWithOr(items);
}

} // namespace braid
