// Checks shared by the validation rules: each one reports what is wrong
// with one field and what to change, and returns whether the field is
// usable, so that rules depending on it can be skipped rather than pile
// misleading errors on top.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

namespace braid {

// Where validation rules send what they find.
class RuleSink {
public:
  virtual ~RuleSink() = default;

  // One broken rule: the path of the field to change ("model.num_heads")
  // and a sentence saying what is wrong and what to do.
  virtual void report(const std::string &path, std::string message) = 0;

  // Whether the spec text wrote the field at `path`. Proto3 keeps no
  // presence for numbers and enums, so this tells `num_layers: 0` (a bad
  // value) from a line left out (a missing field).
  virtual bool written(const std::string &path) const = 0;
};

// A decimal printed the way users write it: 0.9, 1e-05, nan, inf.
std::string formatFloat(double value);

// A count with no default: a value left out is reported as missing, a
// written 0 or negative value as not positive. `what` completes "set ...", e.g.
// "the vocabulary size, e.g. vocab_size: 32000".
bool checkRequiredCount(int64_t value, const std::string &path,
                        const std::string &what, RuleSink &sink);

enum class FloatRange {
  kPositive,    // finite and > 0
  kNonNegative, // finite and >= 0
  kFraction,    // finite and in [0, 1)
};

// A decimal that must be finite, representable in fp32 (not rounding to
// infinity, nor a non-zero value to 0) and within `range`; `advice` says
// what to write instead, e.g. "set a small epsilon such as 1e-5".
bool checkFloat(double value, FloatRange range, const std::string &path,
                const std::string &advice, RuleSink &sink);

// An enum field that must hold one of its named non-zero values: the zero
// value (NORM_UNSPECIFIED, ...) means "not set". Proto3 keeps unknown
// numbers (`norm: 7`), so those are refused here too.
bool checkEnumSet(int value, const google::protobuf::EnumDescriptor *type,
                  const std::string &path, RuleSink &sink);

// Up to two values near `target` (the nearest below, then the nearest
// above) in [1, limit] that satisfy `accept`; searches at most 65536
// values on each side so that it stays fast for any input.
std::vector<int64_t> nearbyChoices(int64_t target, int64_t limit,
                                   const std::function<bool(int64_t)> &accept);

// "4 or 8" for nearbyChoices' result; "" when it is empty.
std::string formatChoices(const std::vector<int64_t> &choices);

} // namespace braid
