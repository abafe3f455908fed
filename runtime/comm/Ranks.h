// This process's place among the ranks of a run, and its communicators.
//
// A launcher (mpirun, srun) starts every rank with the same command line and
// says so in the environment; Braid then joins the ranks over MPI and
// checks that their number is the one the plan's mesh was compiled for.
// Started on its own, a process is the single rank of its run, and every
// axis is a SelfCommunicator: no MPI is loaded.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/comm/EmulatedLink.h"
#include "runtime/comm/Mesh.h"

namespace braid {

namespace mpi {
class MpiWorld;
}

// The number of ranks a launcher says it started (Open MPI's
// OMPI_COMM_WORLD_SIZE, Slurm's SLURM_NTASKS with SLURM_PROCID, PMI_SIZE or
// PMIX's), or nullopt when no launcher started this process.
std::optional<int64_t> launcherWorldSize();

class Ranks {
public:
  // Joins the run's ranks for `mesh`. InvalidArgument, saying what to
  // change, when the number of ranks started is not mesh.worldSize();
  // FailedPrecondition when MPI is needed and cannot be loaded. Calls that
  // do not complete within `timeout` fail with DeadlineExceeded.
  static absl::StatusOr<std::unique_ptr<Ranks>>
  join(const MeshShape &mesh, std::chrono::milliseconds timeout);
  ~Ranks();

  int64_t rank() const { return rank_; }
  int64_t worldSize() const { return mesh_.worldSize(); }
  const MeshShape &mesh() const { return mesh_; }
  const MeshCoords &coords() const { return coords_; }
  // This rank's data-parallel group: its size and this rank's place in it.
  int64_t dpSize() const { return mesh_.size(MeshAxis::kDP); }
  int64_t dpRank() const { return coords_[static_cast<int>(MeshAxis::kDP)]; }
  Communicator &axis(MeshAxis axis) const {
    return *comms_[static_cast<int>(axis)];
  }
  // Context parallel's gradient group (meshDataGroup: the DP and CP ranks
  // of this rank's TP and PP coordinates), which sums the gradients when
  // CP is above 1; the DP axis's communicator when it is not.
  Communicator &dataGroup() const {
    return dataGroup_ ? *dataGroup_ : axis(MeshAxis::kDP);
  }
  // Expert parallel's groups (Mesh.h meshExpertGroup and
  // meshExpertDataGroup): the EP group exchanges tokens, the EDP group
  // sums the experts' gradients. Without expert parallel the EP group is
  // this rank alone and the EDP group is the DP axis.
  Communicator &expertGroup() const { return *expert_; }
  Communicator &expertDataGroup() const {
    return expertData_ ? *expertData_ : axis(MeshAxis::kDP);
  }
  int64_t expertRank() const { return expert_->rank(); }
  // The group a plan's collective names (plan.proto MeshAxis: an axis,
  // DP_CP, EP or EDP).
  Communicator &group(plan::MeshAxis axis) const;
  // The communicators for device memory of a GPU run (DeviceCommunicator.h,
  // made over these ranks by the device factory), which the GPU device
  // enqueues the plan's collectives on; null when none were attached.
  void attachDevice(
      std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes> comms);
  DeviceCommunicator *deviceAxis(MeshAxis axis) const {
    return deviceComms_[static_cast<int>(axis)].get();
  }
  // The device communicator of pipeline channel `channel` (0 activations,
  // 1 gradients; plan.proto PeerTransfer). A device communicator matches
  // transfers by order alone, so the two channels, which must not wait on
  // each other, each need one: channel 0 is deviceAxis(kPP), channel 1 one
  // more over the same ranks, attached here. Null when none is.
  void attachDeviceGradientChannel(std::unique_ptr<DeviceCommunicator> comm);
  DeviceCommunicator *devicePipelineChannel(uint32_t channel) const {
    return channel == 0 ? deviceAxis(MeshAxis::kPP)
           : channel == 1 ? deviceGradients_.get()
                          : nullptr;
  }
  // From now on the calls along the axes named in `axes` ("tp", "cp",
  // "pp", "dp" (the data-parallel group, with cp's ranks where cp > 1),
  // "ep", "edp"; empty: all) take at least the time `link` gives them
  // (EmulatedLink.h): for benchmarks of overlap on one machine.
  void emulateLink(const LinkModel &link,
                   const std::set<std::string> &axes = {});
  // Ends every rank (MPI_Abort where ranks were joined over MPI), after a
  // failure here that the others would otherwise wait for.
  [[noreturn]] void abortAll(int code) const;

private:
  Ranks() = default;

  int64_t rank_ = 0;
  MeshShape mesh_;
  MeshCoords coords_{};
  std::unique_ptr<mpi::MpiWorld> world_;
  std::array<std::unique_ptr<Communicator>, kNumMeshAxes> comms_;
  std::unique_ptr<Communicator> dataGroup_; // null: CP of 1
  std::unique_ptr<Communicator> expert_;    // a SelfCommunicator: EP of 1
  std::unique_ptr<Communicator> expertData_; // null: EP of 1
  std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes> deviceComms_;
  std::unique_ptr<DeviceCommunicator> deviceGradients_;
};

} // namespace braid
