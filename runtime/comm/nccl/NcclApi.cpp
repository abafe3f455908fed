#include "runtime/comm/nccl/NcclApi.h"

#include <glob.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/DynamicLibrary.h"

namespace braid::nccl {
namespace {

constexpr const char *kOverride = "BRAID_NCCL_LIBRARY";

// Every path matching `pattern`, sorted (glob's order).
std::vector<std::string> matching(const std::string &pattern) {
  std::vector<std::string> out;
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
    for (size_t i = 0; i < found.gl_pathc; ++i)
      out.emplace_back(found.gl_pathv[i]);
  globfree(&found);
  return out;
}

void addUnique(std::vector<std::string> &list, std::string item) {
  for (const std::string &have : list)
    if (have == item)
      return;
  list.push_back(std::move(item));
}

} // namespace

DataType dataType(DType dtype) {
  switch (dtype) {
  case DType::kF32:
    return kFloat32;
  case DType::kI32:
    return kInt32;
  case DType::kBF16:
    return kBfloat16;
  }
  return kUint8;
}

const char *resultName(Result result) {
  switch (result) {
  case kSuccess:
    return "ncclSuccess";
  case kUnhandledCudaError:
    return "ncclUnhandledCudaError";
  case kSystemError:
    return "ncclSystemError";
  case kInternalError:
    return "ncclInternalError";
  case kInvalidArgument:
    return "ncclInvalidArgument";
  case kInvalidUsage:
    return "ncclInvalidUsage";
  case kRemoteError:
    return "ncclRemoteError";
  case kInProgress:
    return "ncclInProgress";
  case kTimeout:
    return "ncclTimeout";
  }
  return "an NCCL result not known to this build";
}

std::string NcclApi::describe(Result result, CommHandle comm) const {
  std::string text = absl::StrCat(
      getErrorString != nullptr ? getErrorString(result) : "NCCL error", " (",
      resultName(result), " = ", static_cast<int>(result), ")");
  if (comm != nullptr && getLastError != nullptr) {
    const char *last = getLastError(comm);
    if (last != nullptr && last[0] != '\0')
      absl::StrAppend(&text, ": ", last);
  }
  return text;
}

std::string NcclApi::versionText() const {
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9 (X * 1000 +
  // Y * 100 + Z before).
  if (version >= 10000)
    return absl::StrCat(version / 10000, ".", version / 100 % 100, ".",
                        version % 100);
  return absl::StrCat(version / 1000, ".", version / 100 % 10, ".",
                      version % 100);
}

std::vector<std::string> ncclLibraryCandidates() {
  if (const char *given = std::getenv(kOverride);
      given != nullptr && given[0] != '\0')
    return {given};
  std::vector<std::string> out = {"libnccl.so.2", "libnccl.so"};
  std::vector<std::string> prefixes;
  for (const char *var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char *v = std::getenv(var); v != nullptr && v[0] != '\0')
      prefixes.emplace_back(v);
  if (const char *home = std::getenv("HOME"); home != nullptr && home[0]) {
    prefixes.push_back(absl::StrCat(home, "/.local"));
    prefixes.push_back(absl::StrCat(home, "/.pyenv/versions/*"));
  }
  for (const char *p : {"/usr/local", "/usr", "/opt/conda"})
    prefixes.emplace_back(p);
  for (const std::string &prefix : prefixes)
    for (const char *packages : {"site-packages", "dist-packages"})
      for (std::string &path :
           matching(absl::StrCat(prefix, "/lib/python3*/", packages,
                                 "/nvidia/nccl/lib/libnccl.so.2")))
        addUnique(out, std::move(path));
  return out;
}

absl::StatusOr<NcclApi> loadNcclFrom(absl::Span<const std::string> candidates) {
  std::vector<const char *> names;
  for (const std::string &c : candidates)
    names.push_back(c.c_str());
  DynamicLibrary lib = openFirstLibrary(names, RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL is not installed or not on the library path (tried ",
        lib.reasons.empty() ? "nothing" : lib.reasons,
        "); the GPU's collectives need it: install it (Debian: libnccl2; "
        "PyTorch's pip wheels ship it as nvidia-nccl-cu13) or name its "
        "libnccl.so.2 in ",
        kOverride));
  NcclApi api;
  api.libraryName = lib.name;
  SymbolResolver resolve(lib.handle);
  resolve("ncclGetVersion", api.getVersion);
  resolve("ncclGetUniqueId", api.getUniqueId);
  resolve("ncclCommInitRank", api.commInitRank);
  resolve("ncclCommDestroy", api.commDestroy);
  resolve("ncclCommAbort", api.commAbort);
  resolve("ncclCommGetAsyncError", api.commGetAsyncError);
  resolve("ncclGetErrorString", api.getErrorString);
  resolve("ncclAllReduce", api.allReduce);
  resolve("ncclReduceScatter", api.reduceScatter);
  resolve("ncclAllGather", api.allGather);
  resolve("ncclBroadcast", api.broadcast);
  resolve("ncclSend", api.send);
  resolve("ncclRecv", api.recv);
  resolve("ncclGroupStart", api.groupStart);
  resolve("ncclGroupEnd", api.groupEnd);
  if (!resolve.missing().empty()) {
    dlclose(lib.handle);
    return absl::FailedPreconditionError(absl::StrCat(
        lib.name, " lacks ", resolve.missing(),
        "; it is not NCCL, or an NCCL older than 2.7 (send and recv)"));
  }
  api.getLastError = reinterpret_cast<decltype(api.getLastError)>(
      dlsym(lib.handle, "ncclGetLastError"));
  if (Result r = api.getVersion(&api.version); r != kSuccess) {
    absl::Status failed = absl::FailedPreconditionError(absl::StrCat(
        lib.name, ": ncclGetVersion failed: ", api.describe(r)));
    dlclose(lib.handle);
    return failed;
  }
  // bf16 (ncclBfloat16) arrived in 2.10.
  if (api.version < 21000) {
    dlclose(lib.handle);
    return absl::FailedPreconditionError(
        absl::StrCat(lib.name, " is NCCL ", api.versionText(),
                     "; the runtime needs NCCL 2.10 or later (bf16)"));
  }
  // The library stays loaded for the life of the process.
  return api;
}

absl::StatusOr<const NcclApi *> loadNccl() {
  static const absl::StatusOr<NcclApi> *loaded = new absl::StatusOr<NcclApi>(
      loadNcclFrom(ncclLibraryCandidates()));
  if (!loaded->ok())
    return loaded->status();
  return &loaded->value();
}

} // namespace braid::nccl
