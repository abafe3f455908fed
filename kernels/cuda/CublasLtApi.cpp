#include "kernels/cuda/CublasLtApi.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace braid::cuda {
namespace {

// Newest first: CUDA 13's library, CUDA 12's (same ABI for every entry
// point used here), then whatever the unversioned development link names.
constexpr const char *kLibraryNames[] = {"libcublasLt.so.13",
                                         "libcublasLt.so.12",
                                         "libcublasLt.so"};

template <typename Fn>
bool resolve(void *library, const char *symbol, Fn &fn, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (fn == nullptr) {
    absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
    return false;
  }
  return true;
}

absl::StatusOr<CublasLtApi> load() {
  void *library = nullptr;
  const char *found = nullptr;
  std::string reasons;
  for (const char *name : kLibraryNames) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      found = name;
      break;
    }
    const char *why = dlerror();
    absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", name, ": ",
                    why ? why : "not found");
  }
  if (library == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "cuBLASLt is not installed or not on the library path (tried ",
        reasons, "); the CUDA backend needs it for its GEMMs"));

  CublasLtApi api;
  api.libraryName = found;
  std::string missing;
  resolve(library, "cublasLtCreate", api.create, missing);
  resolve(library, "cublasLtDestroy", api.destroy, missing);
  resolve(library, "cublasLtGetStatusString", api.getStatusString, missing);
  resolve(library, "cublasLtGetVersion", api.getVersion, missing);
  resolve(library, "cublasLtMatmulDescCreate", api.matmulDescCreate, missing);
  resolve(library, "cublasLtMatmulDescDestroy", api.matmulDescDestroy,
          missing);
  resolve(library, "cublasLtMatmulDescSetAttribute",
          api.matmulDescSetAttribute, missing);
  resolve(library, "cublasLtMatrixLayoutCreate", api.matrixLayoutCreate,
          missing);
  resolve(library, "cublasLtMatrixLayoutDestroy", api.matrixLayoutDestroy,
          missing);
  resolve(library, "cublasLtMatrixLayoutSetAttribute",
          api.matrixLayoutSetAttribute, missing);
  resolve(library, "cublasLtMatmulPreferenceCreate", api.preferenceCreate,
          missing);
  resolve(library, "cublasLtMatmulPreferenceDestroy", api.preferenceDestroy,
          missing);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute",
          api.preferenceSetAttribute, missing);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", api.algoGetHeuristic,
          missing);
  resolve(library, "cublasLtMatmul", api.matmul, missing);
  if (!missing.empty()) {
    dlclose(library);
    return absl::FailedPreconditionError(
        absl::StrCat(found, " lacks ", missing,
                     "; it is too old for the CUDA backend (CUDA 12 or "
                     "later is needed)"));
  }
  // The library stays loaded for the life of the process.
  return api;
}

}  // namespace

const char *CublasLtApi::statusString(cublasStatus_t status) const {
  if (getStatusString != nullptr) {
    const char *s = getStatusString(status);
    if (s != nullptr)
      return s;
  }
  return "unknown cuBLAS status";
}

absl::StatusOr<const CublasLtApi *> loadCublasLt() {
  static const absl::StatusOr<CublasLtApi> *loaded =
      new absl::StatusOr<CublasLtApi>(load());
  if (!loaded->ok())
    return loaded->status();
  return &loaded->value();
}

absl::StatusOr<cublasLtHandle_t> createHandle(const CublasLtApi &api) {
  cublasLtHandle_t handle = nullptr;
  const cublasStatus_t status = api.create(&handle);
  if (status != CUBLAS_STATUS_SUCCESS)
    return absl::FailedPreconditionError(
        absl::StrCat("cublasLtCreate failed: ", api.statusString(status),
                     " (", static_cast<int>(status), ")"));
  return handle;
}

void destroyHandle(const CublasLtApi &api, cublasLtHandle_t handle) {
  if (handle != nullptr)
    api.destroy(handle);
}

}  // namespace braid::cuda
