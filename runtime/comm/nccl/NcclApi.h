// NCCL, loaded at run time with dlopen, as cuBLASLt is (docs/gpu-backend.md,
// "Deployment"): braid-run starts on a node without NCCL and loads it only
// when a GPU run needs communicators (docs/parallel.md, "GPU: NCCL").
//
// The few types and values used are declared here rather than taken from
// <nccl.h>, so that this builds wherever the runtime does, with or without
// NCCL or the CUDA toolkit: NCCL's C ABI has been stable since 2.x for
// everything below (ncclUniqueId is 128 bytes passed by value; the values of
// ncclResult_t, ncclDataType_t and ncclRedOp_t only ever gained members; a
// cudaStream_t is a pointer, declared void * here). Checked against NCCL
// 2.32's nccl.h.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/registry/Kernel.h"

namespace braid::nccl {

inline constexpr int kUniqueIdBytes = 128; // NCCL_UNIQUE_ID_BYTES
struct UniqueId {
  char internal[kUniqueIdBytes];
};
struct Comm; // ncclComm
using CommHandle = Comm *;
using Stream = void *; // cudaStream_t

enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8, // NCCL 2.28 and later
};

enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9, // NCCL 2.10 and later
};

enum RedOp : int { kSum = 0 };

// NCCL's type for a tensor dtype: f32 is ncclFloat32, i32 ncclInt32, bf16
// ncclBfloat16.
DataType dataType(DType dtype);
// "ncclInvalidUsage" for a result code, "NCCL result N" for one not known.
const char *resultName(Result result);

struct NcclApi {
  Result (*getVersion)(int *version) = nullptr;
  Result (*getUniqueId)(UniqueId *id) = nullptr;
  Result (*commInitRank)(CommHandle *comm, int nranks, UniqueId id,
                         int rank) = nullptr;
  Result (*commDestroy)(CommHandle comm) = nullptr;
  Result (*commAbort)(CommHandle comm) = nullptr;
  Result (*commGetAsyncError)(CommHandle comm, Result *error) = nullptr;
  const char *(*getErrorString)(Result result) = nullptr;
  Result (*allReduce)(const void *send, void *recv, size_t count,
                      DataType type, RedOp op, CommHandle comm,
                      Stream stream) = nullptr;
  Result (*reduceScatter)(const void *send, void *recv, size_t recvCount,
                          DataType type, RedOp op, CommHandle comm,
                          Stream stream) = nullptr;
  Result (*allGather)(const void *send, void *recv, size_t sendCount,
                      DataType type, CommHandle comm, Stream stream) = nullptr;
  Result (*broadcast)(const void *send, void *recv, size_t count,
                      DataType type, int root, CommHandle comm,
                      Stream stream) = nullptr;
  Result (*send)(const void *send, size_t count, DataType type, int peer,
                 CommHandle comm, Stream stream) = nullptr;
  Result (*recv)(void *recv, size_t count, DataType type, int peer,
                 CommHandle comm, Stream stream) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;
  // Optional (NCCL 2.13 and later): the last error's detail; may be null.
  const char *(*getLastError)(CommHandle comm) = nullptr;

  // The library as dlopen found it ("libnccl.so.2", or a path).
  std::string libraryName;
  // NCCL's version code (2.32.3: 23203).
  int version = 0;

  // "invalid usage (ncclInvalidUsage)", with the communicator's last
  // error when `comm` is given and NCCL offers it.
  std::string describe(Result result, CommHandle comm = nullptr) const;
  // "2.32.3".
  std::string versionText() const;
};

// The libraries loadNccl() tries, in order. When BRAID_NCCL_LIBRARY is set,
// that one only (a name or a path), so that a wrong override is reported
// rather than passed over. Otherwise libnccl.so.2 and libnccl.so from the
// loader's search path, then the libnccl.so.2 that PyTorch's wheels install
// (site-packages/nvidia/nccl/lib) in the Python environments of
// $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, ~/.pyenv, /usr/local, /usr and
// /opt/conda, where they exist.
std::vector<std::string> ncclLibraryCandidates();

// Loads the first of `candidates` that dlopen accepts and resolves every
// entry point above (not cached: for tests; the library stays loaded).
// FailedPrecondition naming every library tried and dlopen's reason, or the
// library and the symbols it lacks.
absl::StatusOr<NcclApi> loadNcclFrom(absl::Span<const std::string> candidates);

// loadNcclFrom(ncclLibraryCandidates()) once (thread-safe); later calls
// return the same object or the same error.
absl::StatusOr<const NcclApi *> loadNccl();

} // namespace braid::nccl
