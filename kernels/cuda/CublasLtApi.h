// cuBLASLt, loaded at run time with dlopen (docs/gpu-backend.md,
// "Deployment"): a binary that links the CUDA runtime statically starts on a
// node without cuBLASLt and refuses --device=cuda there with a sentence,
// instead of failing to load. <cublasLt.h> provides the types and enums
// only; every call goes through the function pointers of CublasLtApi.
#pragma once

#include <cublasLt.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braid::cuda {

struct CublasLtApi {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetStatusString) getStatusString = nullptr;
  decltype(&::cublasLtGetVersion) getVersion = nullptr;
  decltype(&::cublasLtMatmulDescCreate) matmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) matmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) matmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) matrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) matrixLayoutDestroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrixLayoutSetAttribute =
      nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute =
      nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;

  // The library's name as dlopen found it ("libcublasLt.so.13", ...).
  const char *libraryName = nullptr;

  // "CUBLAS_STATUS_...: description" for any status.
  const char *statusString(cublasStatus_t status) const;
};

// Loads cuBLASLt once (thread-safe) and resolves every entry point above;
// later calls return the same object, or the same error. The error names
// the libraries tried and dlopen's reason, or the missing symbol.
absl::StatusOr<const CublasLtApi *> loadCublasLt();

// A cuBLASLt handle through `api` (the value to store in
// GpuContext::blasLt), and its release.
absl::StatusOr<cublasLtHandle_t> createHandle(const CublasLtApi &api);
void destroyHandle(const CublasLtApi &api, cublasLtHandle_t handle);

}  // namespace braid::cuda
