// Training checkpoints: a directory step-NNNNNN/ holding
//   model.safetensors      every parameter under its Hugging Face name
//                          (transposed where param.checkpoint_transposed,
//                          and again under param.tied_alias when set),
//                          metadata {"format": "pt"} so transformers loads it;
//   optimizer.safetensors  "<name>.exp_avg" and "<name>.exp_avg_sq" per
//                          parameter, in Braid's layout, and the run's state
//                          as metadata (CheckpointState).
// Gradients are not saved: between steps they are zero.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

// Version of the checkpoint layout, stored in the metadata.
inline constexpr int kCheckpointFormatVersion = 1;

// What a run needs, besides tensors, to continue exactly where it stopped.
struct CheckpointState {
  int64_t step = 0;       // optimizer steps completed
  int64_t dataCursor = 0; // samples consumed
  uint64_t seed = 0;
  int64_t totalSteps = 0; // the --steps that shaped the LR schedule
  bool shuffle = false;
  std::string planName;
};

// "step-000042".
std::string checkpointDirName(int64_t step);

// Writes the checkpoint of `state.step` under `rootDir` (created if needed)
// from the tensors in `arena`, and returns its directory. The directory is
// assembled under a temporary name and renamed into place, so a crash leaves
// either the whole checkpoint or none; an older checkpoint of the same step
// is replaced.
absl::StatusOr<std::string> saveCheckpoint(const std::string &rootDir,
                                           const LoadedPlan &plan,
                                           const uint8_t *arena,
                                           const CheckpointState &state);

// `dir` itself when it holds a checkpoint (model.safetensors), otherwise its
// step-NNNNNN subdirectory of the highest step. NotFound when neither.
absl::StatusOr<std::string> findCheckpointDir(const std::string &dir);

// A checkpoint read into memory and checked against a plan, not yet applied.
class LoadedCheckpoint {
public:
  const CheckpointState &state() const { return state_; }
  const std::string &dir() const { return dir_; }
  // Writes the saved parameters and optimizer moments into their tensors
  // in `arena`, undoing the transposition of transposed parameters.
  void copyInto(const LoadedPlan &plan, uint8_t *arena) const;

private:
  friend absl::StatusOr<LoadedCheckpoint>
  readCheckpoint(const std::string &dir, const LoadedPlan &plan);
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  CheckpointState state_;
  std::string dir_;
};

// Reads the checkpoint in `dir` and checks it against `plan`. Refuses,
// naming the tensor, any checkpoint whose tensors differ from the plan's
// (missing, extra, dtype, shape), and one saved with another seed.
absl::StatusOr<LoadedCheckpoint> readCheckpoint(const std::string &dir,
                                                const LoadedPlan &plan);

} // namespace braid
