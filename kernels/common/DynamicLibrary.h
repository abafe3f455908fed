// Loading a shared library at run time (dlopen) and resolving its entry
// points, for the libraries a binary must start without: cuBLASLt
// (kernels/cuda/CublasLtApi.cpp) and MPI (runtime/comm/mpi/MpiApi.cpp).
#pragma once

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace braid {

struct DynamicLibrary {
  void *handle = nullptr;
  // The name dlopen succeeded with; null when none did.
  const char *name = nullptr;
  // Per name tried and failed: "NAME: dlopen's reason", joined by "; ".
  std::string reasons;
};

// dlopen of the first of `names` that loads, with `flags`.
inline DynamicLibrary openFirstLibrary(absl::Span<const char *const> names,
                                       int flags) {
  DynamicLibrary lib;
  for (const char *name : names) {
    lib.handle = dlopen(name, flags);
    if (lib.handle != nullptr) {
      lib.name = name;
      return lib;
    }
    const char *why = dlerror();
    absl::StrAppend(&lib.reasons, lib.reasons.empty() ? "" : "; ", name, ": ",
                    why ? why : "not found");
  }
  return lib;
}

// Resolves symbols of one library, collecting the names of those missing.
class SymbolResolver {
public:
  explicit SymbolResolver(void *handle) : handle_(handle) {}

  // `out` = the address of `symbol` as T (a function or object pointer).
  template <typename T> void operator()(const char *symbol, T &out) {
    out = reinterpret_cast<T>(dlsym(handle_, symbol));
    if (out == nullptr)
      absl::StrAppend(&missing_, missing_.empty() ? "" : ", ", symbol);
  }
  // "a, b": the symbols not found so far; empty when all were.
  const std::string &missing() const { return missing_; }

private:
  void *handle_;
  std::string missing_;
};

} // namespace braid
