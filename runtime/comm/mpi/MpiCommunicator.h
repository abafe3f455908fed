// Ranks started by a launcher (mpirun, srun) talking over MPI: the world,
// and one Communicator per mesh axis on top of it. Every collective is
// posted as a non-blocking MPI call and then polled against the watchdog's
// deadline, so a rank that died or hangs stops the others with a sentence
// naming the call, its group and the ranks it waits for (the roll call of
// ArrivalBoard.h and RollCall.h) instead of a silent hang.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Mesh.h"
#include "runtime/comm/mpi/MpiApi.h"

namespace braid::mpi {

class MpiWorld {
public:
  // Loads MPI and initialises it with MPI_THREAD_MULTIPLE (streams are
  // threads that communicate concurrently). FailedPrecondition when MPI
  // cannot be loaded or does not offer that thread level.
  static absl::StatusOr<std::unique_ptr<MpiWorld>> init();
  // Finalises MPI.
  ~MpiWorld();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const MpiApi &api() const { return *api_; }

  // The communicators of every mesh axis, created in kMeshAxes order
  // (TP first) by splitting the world: each rank's group along an axis is
  // meshGroup(shape, rank, axis). The shape's world size must be size().
  // Calls that take longer than `timeout` fail (DeadlineExceeded). Each
  // communicator of more than one rank makes its arrival board (an MPI
  // window, collectively, as the split is) and frees it before the
  // communicator, so every rank must free them in the same order.
  absl::StatusOr<std::array<std::unique_ptr<Communicator>, kNumMeshAxes>>
  axisCommunicators(const MeshShape &shape,
                    std::chrono::milliseconds timeout) const;
  // The communicator of context parallel's gradient group
  // (meshDataGroup), made by splitting the world like the axes' (every rank
  // calls it, after axisCommunicators).
  absl::StatusOr<std::unique_ptr<Communicator>>
  dataGroupCommunicator(const MeshShape &shape,
                        std::chrono::milliseconds timeout) const;

  // The communicators of expert parallel's EP and EDP groups
  // (meshExpertGroup, meshExpertDataGroup), made like the others (every
  // rank calls it, after dataGroupCommunicator where that is called).
  absl::StatusOr<
      std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>>>
  expertCommunicators(const MeshShape &shape,
                      std::chrono::milliseconds timeout) const;

  // Ends every rank of the job (after a failure on this one, so that no
  // rank is left waiting for it).
  [[noreturn]] void abort(int code) const;

private:
  // Splits the world: the ranks with equal `group` form a communicator, in
  // the order of `key`; `members` are its world ranks in that order.
  absl::StatusOr<std::unique_ptr<Communicator>>
  splitCommunicator(const char *label, int64_t group, int64_t key,
                    std::vector<int64_t> members,
                    std::chrono::milliseconds timeout) const;

  MpiWorld(const MpiApi *api, int rank, int size)
      : api_(api), rank_(rank), size_(size) {}

  const MpiApi *api_;
  int rank_, size_;
};

} // namespace braid::mpi
