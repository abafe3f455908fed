// MPI, loaded at run time with dlopen (DESIGN: one binary runs on a node
// with or without MPI): braid-run starts without libmpi and loads it only
// when a launcher (mpirun, srun) started it. <mpi.h> provides the types and
// signatures only; every call goes through the function pointers here, and
// the predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...), which
// Open MPI defines as addresses of library globals, are resolved by name.
// This is Open MPI's ABI (libmpi.so.40, Debian's openmpi package).
#pragma once

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include "absl/status/statusor.h"

namespace braid::mpi {

struct MpiApi {
  decltype(&::MPI_Init_thread) initThread = nullptr;
  decltype(&::MPI_Initialized) initialized = nullptr;
  decltype(&::MPI_Finalized) finalized = nullptr;
  decltype(&::MPI_Finalize) finalize = nullptr;
  decltype(&::MPI_Abort) abort = nullptr;
  decltype(&::MPI_Comm_rank) commRank = nullptr;
  decltype(&::MPI_Comm_size) commSize = nullptr;
  decltype(&::MPI_Comm_split) commSplit = nullptr;
  decltype(&::MPI_Comm_free) commFree = nullptr;
  decltype(&::MPI_Comm_set_errhandler) commSetErrhandler = nullptr;
  decltype(&::MPI_Error_string) errorString = nullptr;
  decltype(&::MPI_Iallreduce) iallreduce = nullptr;
  decltype(&::MPI_Ireduce_scatter_block) ireduceScatterBlock = nullptr;
  decltype(&::MPI_Iallgather) iallgather = nullptr;
  decltype(&::MPI_Ialltoall) ialltoall = nullptr;
  decltype(&::MPI_Ialltoallv) ialltoallv = nullptr;
  decltype(&::MPI_Ibcast) ibcast = nullptr;
  decltype(&::MPI_Isend) isend = nullptr;
  decltype(&::MPI_Irecv) irecv = nullptr;
  decltype(&::MPI_Test) test = nullptr;
  decltype(&::MPI_Get_library_version) getLibraryVersion = nullptr;
  // One-sided: the watchdog's arrival records (ArrivalBoard.h).
  decltype(&::MPI_Win_allocate) winAllocate = nullptr;
  decltype(&::MPI_Win_free) winFree = nullptr;
  decltype(&::MPI_Win_get_attr) winGetAttr = nullptr;
  decltype(&::MPI_Win_set_errhandler) winSetErrhandler = nullptr;
  decltype(&::MPI_Win_lock_all) winLockAll = nullptr;
  decltype(&::MPI_Win_unlock_all) winUnlockAll = nullptr;
  decltype(&::MPI_Rget) rget = nullptr;

  // Predefined handles.
  MPI_Comm commWorld = nullptr;
  MPI_Datatype byte = nullptr;
  MPI_Datatype float32 = nullptr;
  MPI_Datatype int32 = nullptr;
  MPI_Datatype uint16 = nullptr;
  MPI_Datatype uint64 = nullptr;
  MPI_Info infoNull = nullptr;
  MPI_Op sum = nullptr;
  MPI_Errhandler errorsReturn = nullptr;

  // The library's name as dlopen found it ("libmpi.so.40").
  const char *libraryName = nullptr;

  // MPI's sentence for an error code.
  std::string describe(int code) const;
};

// Loads MPI once (thread-safe) and resolves everything above; later calls
// return the same object or the same error, which names the libraries
// tried and dlopen's reason, or the missing symbol.
absl::StatusOr<const MpiApi *> loadMpi();

} // namespace braid::mpi
