#include "kernels/checks/LaunchChecker.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace braid::checks {
namespace {

const KernelParams &paramsOf(const KernelSignature &sig) {
  static const KernelParams kEmpty;
  return sig.params ? *sig.params : kEmpty;
}

std::string countWords(int n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string roleList(std::initializer_list<absl::string_view> names,
                     int numOptional) {
  std::string out;
  int i = 0;
  int firstOptional = static_cast<int>(names.size()) - numOptional;
  for (absl::string_view n : names) {
    if (i)
      out += ", ";
    if (i >= firstOptional)
      out += "optional ";
    out.append(n.data(), n.size());
    ++i;
  }
  return out;
}

} // namespace

std::string shapeString(absl::Span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&out, i ? ", " : "", shape[i]);
  return out + "]";
}

std::vector<int64_t> leadingDims(const TensorDesc &d) {
  if (d.shape.empty())
    return {};
  return std::vector<int64_t>(d.shape.begin(), d.shape.end() - 1);
}

std::vector<int64_t> withLastDim(const TensorDesc &d, int64_t last) {
  std::vector<int64_t> out = leadingDims(d);
  out.push_back(last);
  return out;
}

absl::Status LaunchChecker::error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(kernel_, ": ", message));
}

absl::Status
LaunchChecker::count(bool isInput, int have,
                     std::initializer_list<absl::string_view> names,
                     int numOptional) {
  const int most = static_cast<int>(names.size());
  const int least = most - numOptional;
  absl::string_view noun = isInput ? "input" : "output";
  if (have < least || have > most) {
    std::string want = least == most
                           ? countWords(most, noun)
                           : absl::StrCat(least, " to ", most, " ", noun, "s");
    return error(absl::StrCat("expected ", want, " (",
                              roleList(names, numOptional), "), got ", have));
  }
  std::vector<std::string> &labels = isInput ? inNames_ : outNames_;
  labels.clear();
  int i = 0;
  for (absl::string_view n : names) {
    if (i < have)
      labels.push_back(absl::StrCat(noun, " ", i, " (", n, ")"));
    ++i;
  }
  return dims(isInput);
}

absl::Status
LaunchChecker::inputs(std::initializer_list<absl::string_view> names,
                      int numOptional) {
  return count(true, numIns(), names, numOptional);
}

absl::Status
LaunchChecker::outputs(std::initializer_list<absl::string_view> names,
                       int numOptional) {
  return count(false, numOuts(), names, numOptional);
}

absl::Status LaunchChecker::variadicInputs(absl::string_view name) {
  if (numIns() < 1)
    return error(absl::StrCat("expected at least 1 input (", name, "), got 0"));
  inNames_.clear();
  for (int i = 0; i < numIns(); ++i)
    inNames_.push_back(absl::StrCat("input ", i, " (", name, ")"));
  return dims(true);
}

absl::Status LaunchChecker::variadicOutputs(absl::string_view name) {
  if (numOuts() < 1)
    return error(
        absl::StrCat("expected at least 1 output (", name, "), got 0"));
  outNames_.clear();
  for (int i = 0; i < numOuts(); ++i)
    outNames_.push_back(absl::StrCat("output ", i, " (", name, ")"));
  return dims(false);
}

// Bounds every element count well below 2^63 so that index arithmetic in
// the kernels (products of two dimensions and more) cannot overflow.
absl::Status LaunchChecker::dims(bool isInput) const {
  const int n = isInput ? numIns() : numOuts();
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  for (int i = 0; i < n; ++i) {
    Operand op = isInput ? in(i) : out(i);
    int64_t elements = 1;
    for (int64_t d : op.shape()) {
      if (d < 0)
        return error(absl::StrCat(op.label, " has shape ",
                                  shapeString(op.shape()),
                                  " with a negative dimension"));
      if (d != 0 && elements > kMaxElements / d)
        return error(absl::StrCat(op.label, " has shape ",
                                  shapeString(op.shape()),
                                  ", more than 2^48 elements"));
      elements *= d;
    }
  }
  return absl::OkStatus();
}

Operand LaunchChecker::in(int i) const {
  return Operand{&sig_.ins[i], i < static_cast<int>(inNames_.size())
                                   ? inNames_[i]
                                   : absl::StrCat("input ", i)};
}

Operand LaunchChecker::out(int i) const {
  return Operand{&sig_.outs[i], i < static_cast<int>(outNames_.size())
                                    ? outNames_[i]
                                    : absl::StrCat("output ", i)};
}

absl::Status LaunchChecker::dtype(const Operand &op, DType want) const {
  DType have = op.desc->dtype;
  if (have == want)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has dtype ", toAbsl(dtypeName(have)),
                            ", expected ", toAbsl(dtypeName(want))));
}

absl::Status LaunchChecker::floatStorage(const Operand &op) const {
  DType have = op.desc->dtype;
  if (have == DType::kF32 || have == DType::kBF16)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has dtype ", toAbsl(dtypeName(have)),
                            ", expected f32 or bf16"));
}

absl::Status LaunchChecker::sameDtype(const Operand &op,
                                      const Operand &like) const {
  BRAID_KERNEL_TRY(floatStorage(op));
  DType have = op.desc->dtype, want = like.desc->dtype;
  if (have == want)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has dtype ", toAbsl(dtypeName(have)),
                            ", expected ", toAbsl(dtypeName(want)),
                            ", the dtype of ", like.label));
}

absl::Status LaunchChecker::f32(const Operand &op,
                                absl::string_view why) const {
  DType have = op.desc->dtype;
  if (have == DType::kF32)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has dtype ", toAbsl(dtypeName(have)),
                            ", expected f32: ", why));
}

absl::Status LaunchChecker::allF32(absl::string_view why) const {
  for (int i = 0; i < numIns(); ++i)
    BRAID_KERNEL_TRY(f32(in(i), why));
  for (int i = 0; i < numOuts(); ++i)
    BRAID_KERNEL_TRY(f32(out(i), why));
  return absl::OkStatus();
}

absl::Status LaunchChecker::gradWeightDtype(const Operand &op,
                                            const Operand &like) const {
  BRAID_KERNEL_TRY(floatStorage(op));
  DType have = op.desc->dtype, input = like.desc->dtype;
  if (have == DType::kF32 || have == input)
    return absl::OkStatus();
  return error(absl::StrCat(
      op.label, " has dtype ", toAbsl(dtypeName(have)),
      ", expected f32: a weight gradient is f32, or bf16 over bf16 inputs, "
      "and ",
      like.label, " is ", toAbsl(dtypeName(input))));
}

absl::Status LaunchChecker::rank(const Operand &op, int64_t want,
                                 absl::string_view layout) const {
  if (op.rank() == want)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                            ", expected rank ", want, " ", layout));
}

absl::Status LaunchChecker::minRank(const Operand &op, int64_t want,
                                    absl::string_view layout) const {
  if (op.rank() >= want)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                            ", expected rank ", want, " or more ", layout));
}

absl::Status LaunchChecker::sameShape(const Operand &op,
                                      const Operand &like) const {
  if (op.shape() == like.shape())
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                            ", expected ", shapeString(like.shape()),
                            ", the shape of ", like.label));
}

absl::Status LaunchChecker::shape(const Operand &op,
                                  absl::Span<const int64_t> want,
                                  absl::string_view why) const {
  if (absl::Span<const int64_t>(op.shape()) == want)
    return absl::OkStatus();
  return error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                            ", expected ", shapeString(want), " ", why));
}

absl::StatusOr<int64_t> LaunchChecker::intParam(absl::string_view name,
                                                int64_t lo, int64_t hi) const {
  const KernelParams &params = paramsOf(sig_);
  if (!params.has(toStd(name)))
    return error(absl::StrCat("missing integer parameter '", name, "'"));
  absl::StatusOr<int64_t> v = params.getInt(toStd(name));
  if (!v.ok())
    return error(v.status().message());
  if (*v < lo || *v > hi)
    return error(absl::StrCat("parameter '", name, "' is ", *v,
                              ", expected a value in [", lo, ", ", hi, "]"));
  return *v;
}

absl::StatusOr<int64_t> LaunchChecker::intParamOr(absl::string_view name,
                                                  int64_t fallback, int64_t lo,
                                                  int64_t hi) const {
  if (!paramsOf(sig_).has(toStd(name)))
    return fallback;
  return intParam(name, lo, hi);
}

absl::StatusOr<double> LaunchChecker::floatParam(absl::string_view name) const {
  const KernelParams &params = paramsOf(sig_);
  if (!params.has(toStd(name)))
    return error(absl::StrCat("missing float parameter '", name, "'"));
  absl::StatusOr<double> v = params.getFloat(toStd(name));
  if (!v.ok())
    return error(v.status().message());
  if (!std::isfinite(*v))
    return error(absl::StrCat("parameter '", name, "' is ", *v,
                              ", expected a finite number"));
  return *v;
}

absl::StatusOr<double> LaunchChecker::floatParamOr(absl::string_view name,
                                                   double fallback) const {
  if (!paramsOf(sig_).has(toStd(name)))
    return fallback;
  return floatParam(name);
}

absl::Status LaunchChecker::accumulateParam() const {
  return intParamOr("accumulate", 0, 0, 1).status();
}

} // namespace braid::checks
