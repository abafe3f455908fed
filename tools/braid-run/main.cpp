// braid-run: trains the model of a plan on the CPU or an NVIDIA GPU. See
// docs/braid-run.md.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "kernels/registry/Kernel.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/comm/Ranks.h"
#include "runtime/io/FileIdentity.h"
#include "runtime/data/TokenData.h"
#include "runtime/data/TokenFormat.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/plan/EmbeddedPlan.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/StopSignal.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/TrainingLoop.h"
#include "tools/braid-run/CommandLine.h"

namespace braid {
namespace {

// Marks this executable as a Braid runtime, so that braidc --emit=binary
// accepts it as --runtime (EmbeddedPlan.h).
[[gnu::section(".braid_runtime"), gnu::used]] constexpr RuntimeMarker
    kRuntimeMarker = {"braid-run", kPlanFormatVersion};

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int fail(const absl::Status &status) {
  std::fprintf(stderr, "braid-run: error: %s\n",
               std::string(status.message()).c_str());
  return kExitError;
}

// The plan, embedded or from the command line.
absl::StatusOr<LoadedPlan> loadThePlan(const CommandLine &cl,
                                       const std::optional<std::string> &embedded) {
  const Device device = cl.device == "cuda" ? Device::kCUDA : Device::kCPU;
  return embedded ? loadSealedPlan(*embedded,
                                   "the plan embedded in this executable",
                                   PlanSource::kEmbedded,
                                   defaultKernelRegistry(), device)
                  : loadPlanFile(cl.planPath, defaultKernelRegistry(), device);
}

std::chrono::milliseconds commTimeout(const CommandLine &cl) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(cl.commTimeoutSeconds * 1000));
}

// The ranks of the run the plan's mesh asks for (a single one when no
// launcher started this process).
absl::StatusOr<std::unique_ptr<Ranks>> joinRanks(const CommandLine &cl,
                                                 const LoadedPlan &plan) {
  return Ranks::join(planMesh(plan.proto.mesh()), commTimeout(cl));
}

// The data and the trainer.
absl::StatusOr<std::unique_ptr<Trainer>>
buildTrainer(const CommandLine &cl, LoadedPlan plan, const Ranks &ranks) {
  absl::StatusOr<TokenFormat> format =
      chooseTokenFormat(cl.dataPath, cl.dataFormat);
  if (!format.ok())
    return format.status();
  absl::StatusOr<TokenData> data = TokenData::fromFile(
      cl.dataPath, *format, plan.proto.model().vocab_size());
  if (!data.ok())
    return data.status();
  TrainerOptions options;
  options.totalSteps = cl.steps;
  options.shuffle = cl.shuffle;
  options.numThreads = cl.threads;
  options.cudaGraphs = cl.cudaGraphs;
  options.ranks = &ranks;
  return Trainer::create(std::move(plan), std::move(*data), options);
}

// The files the run reads, which no output may be.
std::vector<NamedInput> inputsOf(const CommandLine &cl, bool embedded) {
  std::vector<NamedInput> inputs = {
      {"the data file (--data)", cl.dataPath},
      embedded ? NamedInput{"this executable", "/proc/self/exe"}
               : NamedInput{"the plan file", cl.planPath},
  };
  if (!cl.resumeDir.empty()) {
    absl::StatusOr<std::string> dir = findCheckpointDir(cl.resumeDir);
    if (dir.ok())
      for (const std::string &file : checkpointFilePaths(*dir))
        inputs.push_back({"a file of the checkpoint being resumed", file});
  }
  return inputs;
}

// Restores the checkpoint of --resume. Returns true when training should go
// on, false when the checkpoint already is where the run would stop.
absl::StatusOr<bool> resume(const CommandLine &cl, Trainer &trainer) {
  // A checkpoint a dead saver moved aside is put back before the latest is
  // chosen.
  for (const std::string &note : recoverCheckpointDir(cl.resumeDir))
    std::fprintf(stderr, "braid-run: %s\n", note.c_str());
  absl::StatusOr<ResumeReport> from =
      trainer.resume(cl.resumeDir, cl.allowChanges);
  if (!from.ok())
    return from.status();
  const long long done = trainer.stepsDone();
  if (!cl.quiet)
    std::printf("resumed from %s (step %lld of %lld)\n", from->dir.c_str(),
                done, static_cast<long long>(trainer.totalSteps()));
  // What differs from the checkpoint is said even with --quiet.
  for (const std::string &change : from->changes)
    std::printf("changed on resume: %s\n", change.c_str());
  if (cl.stopAfter > 0 && cl.stopAfter <= done) {
    std::printf("nothing to do: --stop-after %lld, and the checkpoint is at "
                "step %lld\n",
                static_cast<long long>(cl.stopAfter), done);
    return false;
  }
  if (done >= trainer.totalSteps()) {
    std::printf("nothing to do: the checkpoint is at step %lld of %lld\n", done,
                static_cast<long long>(trainer.totalSteps()));
    return false;
  }
  return true;
}

// The run of one rank. Rank 0 prints, logs and saves checkpoints for the
// whole run (the others' parameters are the same); with several ranks, an
// error on any of them ends the job, so that no rank waits for it.
int runRank(const CommandLine &given, LoadedPlan plan, const Ranks &ranks) {
  CommandLine cl = given;
  const bool several = ranks.worldSize() > 1;
  auto failRank = [&](const absl::Status &status) {
    if (!several)
      return fail(status);
    std::fprintf(stderr, "braid-run: error: rank %lld: %s\n",
                 static_cast<long long>(ranks.rank()),
                 std::string(status.message()).c_str());
    std::fflush(stderr);
    ranks.abortAll(kExitError);
  };
  if (ranks.rank() != 0) {
    cl.logPath.clear();
    cl.saveDir.clear();
    cl.quiet = true;
    // What rank 0 says for the run, the others would only repeat.
    if (std::freopen("/dev/null", "w", stdout) == nullptr)
      return failRank(absl::InternalError("cannot silence stdout"));
  }
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      buildTrainer(cl, std::move(plan), ranks);
  if (!trainer.ok())
    return failRank(trainer.status());
  // OpenBLAS keeps its own thread pool; give it the kernels' budget so that
  // the thread count bounds the whole process (and the measured peak).
  openblas_set_num_threads((*trainer)->numThreads());
  if (!cl.resumeDir.empty()) {
    absl::StatusOr<bool> goOn = resume(cl, **trainer);
    if (!goOn.ok())
      return failRank(goOn.status());
    if (!*goOn)
      return 0;
  }
  RunOptions options;
  options.logPath = cl.logPath;
  options.saveDir = cl.saveDir;
  // Sharded tensors reach rank 0's checkpoint through every rank.
  options.checkpointPeer = ranks.rank() != 0 && !given.saveDir.empty();
  options.saveInterval = cl.saveInterval;
  options.checkpointLayout.maxShardBytes = cl.saveShardBytes;
  options.stopAfter = cl.stopAfter;
  options.skipNonfinite = cl.skipNonfinite;
  options.quiet = cl.quiet;
  options.profile = cl.profile;
  options.traceDir = cl.traceDir;
  options.rank = static_cast<int>(ranks.rank());
  options.peakGflops = cl.peakGflops;
  options.reportStop = ranks.rank() == 0;
  // Rank 0 saves for every rank.
  installStopHandlers(!given.saveDir.empty());
  absl::StatusOr<int> code = runTraining(**trainer, options);
  if (!code.ok())
    return failRank(code.status());
  return *code;
}

int run(const CommandLine &cl, const std::optional<std::string> &embedded) {
  if (cl.device == "cuda") {
    // Refused before the plan is read: without the backend nothing else
    // about the run matters.
    if (absl::Status s = probeDevice(Device::kCUDA); !s.ok())
      return fail(absl::Status(s.code(),
                               absl::StrCat("--device=cuda: ", s.message())));
  }
  if (!cl.logPath.empty())
    if (absl::Status s = refuseInputAsOutput(
            "--log", cl.logPath, inputsOf(cl, embedded.has_value()));
        !s.ok())
      return fail(s);
  absl::StatusOr<LoadedPlan> plan = loadThePlan(cl, embedded);
  if (!plan.ok())
    return fail(plan.status());
  // Every rank refuses a wrong number of ranks alike, before any work.
  absl::StatusOr<std::unique_ptr<Ranks>> ranks = joinRanks(cl, *plan);
  if (!ranks.ok())
    return fail(ranks.status());
  // A GPU's collectives go over NCCL, bootstrapped over the ranks' MPI; the
  // CPU's over MPI itself. A rank that fails here may leave others waiting
  // inside NCCL: several ranks end the job.
  if (absl::Status s =
          attachDeviceCommunicators(*plan, **ranks, commTimeout(cl));
      !s.ok()) {
    if ((*ranks)->worldSize() == 1)
      return fail(s);
    std::fprintf(stderr, "braid-run: error: rank %lld: %s\n",
                 static_cast<long long>((*ranks)->rank()),
                 std::string(s.message()).c_str());
    std::fflush(stderr);
    (*ranks)->abortAll(kExitError);
  }
  if (cl.emulateLink)
    (*ranks)->emulateLink(*cl.emulateLink, cl.emulateLinkAxes);
  return runRank(cl, std::move(*plan), **ranks);
}

} // namespace
} // namespace braid

int main(int argc, char **argv) {
  // Past a file-size limit a write fails with EFBIG, which every output
  // reports; the default action of SIGXFSZ would kill the run instead.
  std::signal(SIGXFSZ, SIG_IGN);
  const std::string program = argc > 0 ? argv[0] : "braid-run";
  absl::StatusOr<std::optional<std::string>> embedded =
      braid::readEmbeddedPlan("/proc/self/exe");
  if (!embedded.ok())
    return braid::fail(embedded.status());
  const bool hasPlan = embedded->has_value();
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  absl::StatusOr<braid::CommandLine> cl =
      braid::parseCommandLine(args, hasPlan);
  if (!cl.ok()) {
    std::fprintf(stderr, "braid-run: %s\n\n%s",
                 std::string(cl.status().message()).c_str(),
                 braid::usage(program, hasPlan).c_str());
    return braid::kExitUsage;
  }
  if (cl->help) {
    std::printf("%s", braid::usage(program, hasPlan).c_str());
    return 0;
  }
  return braid::run(*cl, *embedded);
}
