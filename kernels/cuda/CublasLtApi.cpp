#include "kernels/cuda/CublasLtApi.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/common/DynamicLibrary.h"

namespace braid::cuda {
namespace {

// Newest first: CUDA 13's library, CUDA 12's (same ABI for every entry
// point used here), then whatever the unversioned development link names.
constexpr const char *kLibraryNames[] = {"libcublasLt.so.13",
                                         "libcublasLt.so.12",
                                         "libcublasLt.so"};

absl::StatusOr<CublasLtApi> load() {
  DynamicLibrary lib = openFirstLibrary(kLibraryNames, RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "cuBLASLt is not installed or not on the library path (tried ",
        lib.reasons, "); the CUDA backend needs it for its GEMMs"));

  CublasLtApi api;
  api.libraryName = lib.name;
  SymbolResolver resolve(lib.handle);
  resolve("cublasLtCreate", api.create);
  resolve("cublasLtDestroy", api.destroy);
  resolve("cublasLtGetStatusString", api.getStatusString);
  resolve("cublasLtGetVersion", api.getVersion);
  resolve("cublasLtMatmulDescCreate", api.matmulDescCreate);
  resolve("cublasLtMatmulDescDestroy", api.matmulDescDestroy);
  resolve("cublasLtMatmulDescSetAttribute", api.matmulDescSetAttribute);
  resolve("cublasLtMatrixLayoutCreate", api.matrixLayoutCreate);
  resolve("cublasLtMatrixLayoutDestroy", api.matrixLayoutDestroy);
  resolve("cublasLtMatrixLayoutSetAttribute", api.matrixLayoutSetAttribute);
  resolve("cublasLtMatmulPreferenceCreate", api.preferenceCreate);
  resolve("cublasLtMatmulPreferenceDestroy", api.preferenceDestroy);
  resolve("cublasLtMatmulPreferenceSetAttribute", api.preferenceSetAttribute);
  resolve("cublasLtMatmulAlgoGetHeuristic", api.algoGetHeuristic);
  resolve("cublasLtMatmul", api.matmul);
  if (!resolve.missing().empty()) {
    dlclose(lib.handle);
    return absl::FailedPreconditionError(
        absl::StrCat(lib.name, " lacks ", resolve.missing(),
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
