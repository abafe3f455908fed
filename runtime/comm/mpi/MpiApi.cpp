#include "runtime/comm/mpi/MpiApi.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/common/DynamicLibrary.h"

namespace braid::mpi {
namespace {

// Open MPI 4 and 5 (the same ABI for everything used here), then whatever
// the unversioned development link names.
constexpr const char *kLibraryNames[] = {"libmpi.so.40", "libmpi.so"};

absl::StatusOr<MpiApi> load() {
  // Open MPI loads its own components, which resolve libmpi's symbols
  // globally: RTLD_GLOBAL is required.
  DynamicLibrary lib = openFirstLibrary(kLibraryNames, RTLD_NOW | RTLD_GLOBAL);
  if (lib.handle == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "Open MPI is not installed or not on the library path (tried ",
        lib.reasons, "); a run of several ranks needs it (Debian: "
                     "apt-get install openmpi-bin)"));
  MpiApi api;
  api.libraryName = lib.name;
  SymbolResolver resolve(lib.handle);
  resolve("MPI_Init_thread", api.initThread);
  resolve("MPI_Initialized", api.initialized);
  resolve("MPI_Finalized", api.finalized);
  resolve("MPI_Finalize", api.finalize);
  resolve("MPI_Abort", api.abort);
  resolve("MPI_Comm_rank", api.commRank);
  resolve("MPI_Comm_size", api.commSize);
  resolve("MPI_Comm_split", api.commSplit);
  resolve("MPI_Comm_free", api.commFree);
  resolve("MPI_Comm_set_errhandler", api.commSetErrhandler);
  resolve("MPI_Error_string", api.errorString);
  resolve("MPI_Iallreduce", api.iallreduce);
  resolve("MPI_Ireduce_scatter_block", api.ireduceScatterBlock);
  resolve("MPI_Iallgather", api.iallgather);
  resolve("MPI_Ialltoall", api.ialltoall);
  resolve("MPI_Ialltoallv", api.ialltoallv);
  resolve("MPI_Ibcast", api.ibcast);
  resolve("MPI_Isend", api.isend);
  resolve("MPI_Irecv", api.irecv);
  resolve("MPI_Test", api.test);
  resolve("MPI_Get_library_version", api.getLibraryVersion);
  resolve("MPI_Win_allocate", api.winAllocate);
  resolve("MPI_Win_free", api.winFree);
  resolve("MPI_Win_get_attr", api.winGetAttr);
  resolve("MPI_Win_set_errhandler", api.winSetErrhandler);
  resolve("MPI_Win_lock_all", api.winLockAll);
  resolve("MPI_Win_unlock_all", api.winUnlockAll);
  resolve("MPI_Rget", api.rget);
  resolve("ompi_mpi_comm_world", api.commWorld);
  resolve("ompi_mpi_byte", api.byte);
  resolve("ompi_mpi_float", api.float32);
  resolve("ompi_mpi_int", api.int32);
  resolve("ompi_mpi_uint16_t", api.uint16);
  resolve("ompi_mpi_uint64_t", api.uint64);
  resolve("ompi_mpi_info_null", api.infoNull);
  resolve("ompi_mpi_op_sum", api.sum);
  resolve("ompi_mpi_errors_return", api.errorsReturn);
  if (!resolve.missing().empty()) {
    dlclose(lib.handle);
    return absl::FailedPreconditionError(absl::StrCat(
        lib.name, " lacks ", resolve.missing(),
        "; the runtime needs Open MPI's ABI (libmpi.so.40)"));
  }
  // The library stays loaded for the life of the process.
  return api;
}

} // namespace

std::string MpiApi::describe(int code) const {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (errorString != nullptr && errorString(code, text, &length) == 0)
    return absl::StrCat(std::string(text, length), " (MPI error ", code, ")");
  return absl::StrCat("MPI error ", code);
}

absl::StatusOr<const MpiApi *> loadMpi() {
  static const absl::StatusOr<MpiApi> *loaded =
      new absl::StatusOr<MpiApi>(load());
  if (!loaded->ok())
    return loaded->status();
  return &loaded->value();
}

} // namespace braid::mpi
