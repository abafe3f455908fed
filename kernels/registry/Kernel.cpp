#include "kernels/registry/Kernel.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

// This abseil build's string_view is its own type, not std::string_view.
absl::string_view toAbsl(std::string_view s) { return {s.data(), s.size()}; }

} // namespace

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::kF32:
    return "f32";
  case DType::kBF16:
    return "bf16";
  case DType::kI32:
    return "i32";
  }
  return "unknown";
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::kF32:
  case DType::kI32:
    return 4;
  case DType::kBF16:
    return 2;
  }
  return 0;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void KernelParams::setInt(std::string name, int64_t v) {
  for (Entry &e : entries_) {
    if (e.name == name) {
      e = Entry{std::move(name), true, v, 0.0};
      return;
    }
  }
  entries_.push_back(Entry{std::move(name), true, v, 0.0});
}

void KernelParams::setFloat(std::string name, double v) {
  for (Entry &e : entries_) {
    if (e.name == name) {
      e = Entry{std::move(name), false, 0, v};
      return;
    }
  }
  entries_.push_back(Entry{std::move(name), false, 0, v});
}

const KernelParams::Entry *KernelParams::find(std::string_view name) const {
  for (const Entry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

bool KernelParams::has(std::string_view name) const {
  return find(name) != nullptr;
}

absl::StatusOr<int64_t> KernelParams::getInt(std::string_view name) const {
  const Entry *e = find(name);
  if (!e)
    return absl::NotFoundError(
        absl::StrCat("missing integer parameter '", toAbsl(name), "'"));
  if (!e->isInt)
    return absl::InvalidArgumentError(absl::StrCat("parameter '", toAbsl(name),
                                                   "' is a float (", e->f,
                                                   "); expected an integer"));
  return e->i;
}

// An integer parameter is accepted where a float is expected: a plan may
// spell `scale = 1` without a decimal point.
absl::StatusOr<double> KernelParams::getFloat(std::string_view name) const {
  const Entry *e = find(name);
  if (!e)
    return absl::NotFoundError(
        absl::StrCat("missing float parameter '", toAbsl(name), "'"));
  return e->isInt ? static_cast<double>(e->i) : e->f;
}

int64_t KernelParams::intOr(std::string_view name, int64_t fallback) const {
  const Entry *e = find(name);
  return e && e->isInt ? e->i : fallback;
}

double KernelParams::floatOr(std::string_view name, double fallback) const {
  const Entry *e = find(name);
  if (!e)
    return fallback;
  return e->isInt ? static_cast<double>(e->i) : e->f;
}

std::string KernelParams::toString() const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry &e = entries_[i];
    if (i)
      out += ", ";
    if (e.isInt) {
      absl::StrAppend(&out, e.name, "=", e.i);
    } else {
      // %.9g round-trips every float and keeps doubles readable.
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", e.f);
      absl::StrAppend(&out, e.name, "=", buf);
    }
  }
  return out + "}";
}

absl::Status KernelRegistry::add(const KernelDef &def) {
  if (def.name.empty())
    return absl::InvalidArgumentError("kernel registry: empty kernel name");
  if (!def.check || !def.run)
    return absl::InvalidArgumentError(absl::StrCat("kernel registry: kernel '",
                                                   toAbsl(def.name),
                                                   "' lacks a check or run"));
  if (find(def.name, def.device))
    return absl::AlreadyExistsError(
        absl::StrCat("kernel registry: kernel '", toAbsl(def.name),
                     "' is already registered for this device"));
  defs_.push_back(def);
  return absl::OkStatus();
}

const KernelDef *KernelRegistry::find(std::string_view name,
                                      Device device) const {
  for (const KernelDef &d : defs_)
    if (d.device == device && d.name == name)
      return &d;
  return nullptr;
}

std::vector<std::string_view> KernelRegistry::names(Device device) const {
  std::vector<std::string_view> out;
  for (const KernelDef &d : defs_)
    if (d.device == device)
      out.push_back(d.name);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace braid
