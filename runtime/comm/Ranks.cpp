#include "runtime/comm/Ranks.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/comm/SelfCommunicator.h"
#if BRAID_HAVE_MPI
#include "runtime/comm/mpi/MpiCommunicator.h"
#endif

namespace braid {
namespace {

std::optional<int64_t> envInt(const char *name) {
  const char *v = std::getenv(name);
  int64_t n = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &n) || n < 1)
    return std::nullopt;
  return n;
}

std::string launchAdvice(const MeshShape &mesh) {
  return absl::StrCat("the plan's mesh (", mesh.describe(), ") has ",
                      mesh.worldSize(), " rank",
                      mesh.worldSize() == 1 ? "" : "s");
}

} // namespace

std::optional<int64_t> launcherWorldSize() {
  if (auto n = envInt("OMPI_COMM_WORLD_SIZE"))
    return n;
  if (auto n = envInt("PMIX_SIZE"))
    return n;
  if (auto n = envInt("PMI_SIZE"))
    return n;
  if (std::getenv("SLURM_PROCID") != nullptr)
    return envInt("SLURM_NTASKS");
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Ranks>>
Ranks::join(const MeshShape &mesh, std::chrono::milliseconds timeout) {
  std::unique_ptr<Ranks> ranks(new Ranks());
  ranks->mesh_ = mesh;
  const std::optional<int64_t> started = launcherWorldSize();
  if (!started) {
    if (mesh.worldSize() != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          launchAdvice(mesh), "; start it with mpirun -np ", mesh.worldSize(),
          " (or srun -n ", mesh.worldSize(), ")"));
    for (MeshAxis a : kMeshAxes)
      ranks->comms_[static_cast<int>(a)] = std::make_unique<SelfCommunicator>(
          absl::StrCat(meshAxisName(a), " group 0 (rank 0)"));
    ranks->expert_ = std::make_unique<SelfCommunicator>("ep group 0 (rank 0)");
    // A CP of 1 sums over DP alone: dataGroup() is the DP axis's.
    return ranks;
  }
  if (*started != mesh.worldSize())
    return absl::InvalidArgumentError(absl::StrCat(
        launchAdvice(mesh), " but ", *started,
        " were started; launch it with -np ", mesh.worldSize(),
        ", or recompile the spec for ", *started,
        " ranks (parallel.data_parallel x tensor_parallel x "
        "context_parallel x pipeline_parallel)"));
#if BRAID_HAVE_MPI
  absl::StatusOr<std::unique_ptr<mpi::MpiWorld>> world = mpi::MpiWorld::init();
  if (!world.ok())
    return world.status();
  ranks->world_ = std::move(*world);
  ranks->rank_ = ranks->world_->rank();
  ranks->coords_ = meshCoords(mesh, ranks->rank_);
  auto comms = ranks->world_->axisCommunicators(mesh, timeout);
  if (!comms.ok())
    return comms.status();
  ranks->comms_ = std::move(*comms);
  if (mesh.size(MeshAxis::kCP) > 1) {
    auto data = ranks->world_->dataGroupCommunicator(mesh, timeout);
    if (!data.ok())
      return data.status();
    ranks->dataGroup_ = std::move(*data);
  }
  if (mesh.expert > 1) {
    auto experts = ranks->world_->expertCommunicators(mesh, timeout);
    if (!experts.ok())
      return experts.status();
    ranks->expert_ = std::move(experts->first);
    ranks->expertData_ = std::move(experts->second);
  } else {
    ranks->expert_ = std::make_unique<SelfCommunicator>(
        absl::StrCat("ep group ", ranks->rank_, " (rank ", ranks->rank_, ")"));
  }
  return ranks;
#else
  (void)timeout;
  return absl::FailedPreconditionError(
      "this build has no MPI support (it was built without libopenmpi-dev), "
      "so it runs one rank only");
#endif
}

Communicator &Ranks::group(plan::MeshAxis axis) const {
  switch (axis) {
  case plan::DP_CP:
    return dataGroup();
  case plan::EP:
    return expertGroup();
  case plan::EDP:
    return expertDataGroup();
  default:
    // The plan's axes (TP = 1 ...) are MeshAxis + 1.
    return this->axis(static_cast<MeshAxis>(static_cast<int>(axis) - 1));
  }
}

void Ranks::emulateLink(const LinkModel &link,
                        const std::set<std::string> &axes) {
  auto slow = [&](std::unique_ptr<Communicator> &c, const char *axis) {
    if (c && (axes.empty() || axes.count(axis)))
      c = std::make_unique<EmulatedLink>(std::move(c), link);
  };
  for (MeshAxis axis : kMeshAxes)
    slow(comms_[static_cast<int>(axis)], meshAxisName(axis));
  slow(dataGroup_, "dp");
  slow(expert_, "ep");
  slow(expertData_, "edp");
}

void Ranks::attachDevice(
    std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes> comms) {
  deviceComms_ = std::move(comms);
}

void Ranks::attachDeviceGradientChannel(
    std::unique_ptr<DeviceCommunicator> comm) {
  deviceGradients_ = std::move(comm);
}

Ranks::~Ranks() {
  // Communicators go before the world that finalises MPI, the device's
  // (bootstrapped over the host's) first.
  deviceGradients_.reset();
  for (auto &c : deviceComms_)
    c.reset();
  // In the reverse of their making: each frees its watchdog window, a
  // collective call every rank makes in the same order.
  expertData_.reset();
  expert_.reset();
  dataGroup_.reset();
  for (auto &c : comms_)
    c.reset();
}

void Ranks::abortAll(int code) const {
#if BRAID_HAVE_MPI
  if (world_)
    world_->abort(code);
#endif
  std::_Exit(code);
}

} // namespace braid
