// Training checkpoints: a directory step-NNNNNN/ that transformers'
// AutoModelForCausalLM.from_pretrained loads as it is, holding
//   config.json            the model's Hugging Face configuration
//                          (HfConfig.h);
//   model.safetensors      every parameter under its Hugging Face name
//                          (transposed where param.checkpoint_transposed,
//                          and again under param.tied_alias when set),
//                          metadata {"format": "pt"}; or, when the
//                          parameters exceed the shard size, shards
//                          model-00001-of-0000N.safetensors ... and
//                          model.safetensors.index.json (ShardIndex.h);
//   optimizer.safetensors  "<name>.exp_avg" and "<name>.exp_avg_sq" per
//                          parameter, in Braid's layout, and the run's state
//                          and identity as metadata (CheckpointState);
//   manifest.json          the size and CRC-32C of every other file, written
//                          last (CheckpointManifest.h).
// Gradients are not saved: between steps they are zero. No value of a
// checkpoint is ever NaN or infinite: the writer refuses, the reader checks.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "runtime/ckpt/RunIdentity.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

// Version of the checkpoint layout, stored in the metadata and manifest.
// Version 3 added config.json and sharded parameters; the reader also reads
// version 2 (model.safetensors and optimizer.safetensors only).
inline constexpr int kCheckpointFormatVersion = 3;
inline constexpr int kOldestCheckpointFormatVersion = 2;

// How saveCheckpoint lays the parameters out.
struct CheckpointLayout {
  // The most tensor bytes of one model shard (transformers' max_shard_size):
  // parameters that fit are one model.safetensors, others are split.
  uint64_t maxShardBytes = ckpt::kDefaultMaxShardBytes;
};

// What a run needs, besides tensors, to continue exactly where it stopped,
// and what it belongs to.
struct CheckpointState {
  int64_t step = 0;       // optimizer steps completed
  int64_t dataCursor = 0; // samples consumed
  int64_t totalSteps = 0; // the --steps that shaped the LR schedule
  bool shuffle = false;
  // Of the `step` steps, those not applied because they were not finite.
  int64_t skippedSteps = 0;
  // The plan's identity (RunIdentity.h) and its fingerprint.
  std::vector<IdentityField> identity;
  std::string fingerprint;
};

// "step-000042".
std::string checkpointDirName(int64_t step);

// Writes the checkpoint of `state.step` under `rootDir` (created if needed)
// from the tensors in `arena`, a host image of the plan's memory (each
// tensor at LoadedPlan::imageOffset: a host tensor after the arena's
// bytes), laid out as `layout` says, and returns its directory. Refuses, naming the tensor, to write a NaN or an infinity. The
// directory is assembled under a temporary name and renamed into place, so
// a crash leaves either the whole checkpoint or none; an older checkpoint of
// the same step is replaced.
absl::StatusOr<std::string> saveCheckpoint(const std::string &rootDir,
                                           const LoadedPlan &plan,
                                           const uint8_t *arena,
                                           const CheckpointState &state,
                                           const CheckpointLayout &layout = {});

// Tidies `rootDir` after a process died while saving into it: removes the
// temporary directories of saves that never finished, and puts back a
// checkpoint that was moved aside to be replaced when its replacement never
// arrived. Only leftovers of processes that no longer run are touched.
// Returns one line per action, for the run to print.
std::vector<std::string> recoverCheckpointDir(const std::string &rootDir);

// `dir` itself when it holds a checkpoint (manifest.json), otherwise its
// step-NNNNNN subdirectory of the highest step. NotFound when neither.
absl::StatusOr<std::string> findCheckpointDir(const std::string &dir);

// The paths of the files of the checkpoint in `dir`: its manifest and the
// files the manifest lists, or, when the manifest cannot be read, the
// files a checkpoint always has. For refusing outputs that would overwrite
// them; nothing is verified.
std::vector<std::string> checkpointFilePaths(const std::string &dir);

// A checkpoint read into memory and checked against a plan, not yet applied.
class LoadedCheckpoint {
public:
  const CheckpointState &state() const { return state_; }
  const std::string &dir() const { return dir_; }
  // The identity fields that differ from the plan's, all of them allowed.
  const std::vector<IdentityChange> &changes() const { return changes_; }
  // Writes the saved parameters and optimizer moments into their tensors
  // in `arena`, an image as saveCheckpoint's (LoadedPlan::imageOffset),
  // undoing the transposition of transposed parameters. Fails,
  // naming the file, when a file shrank since it was read. With `only`,
  // just the plan's tensors it holds (a pipeline rank's image of the whole
  // model needs its own stage's alone).
  absl::Status
  copyInto(const LoadedPlan &plan, uint8_t *arena,
           const absl::flat_hash_set<uint32_t> *only = nullptr) const;

private:
  friend absl::StatusOr<LoadedCheckpoint>
  readCheckpoint(const std::string &dir, const LoadedPlan &plan,
                 const std::set<std::string> &allowedChanges);
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  CheckpointState state_;
  std::vector<IdentityChange> changes_;
  std::string dir_;
};

// Reads the checkpoint in `dir`, in either layout, and checks it: every
// file against the manifest's sizes and checksums (a flipped or missing
// byte is refused, naming the file), the layout (one model file, or an
// index whose every shard the manifest lists and which maps every tensor
// of the shards, each once, to the shard that holds it, with their total
// size), the state's consistency (the step of the directory, the manifest
// and the metadata agree; the data position is the step's; every count is
// in range), whether it belongs to `plan` (compareIdentity: every differing
// identity field not in `allowedChanges` is named), and every tensor
// against `plan` (missing, extra, dtype, shape) and for NaN or infinity,
// naming the tensor.
absl::StatusOr<LoadedCheckpoint>
readCheckpoint(const std::string &dir, const LoadedPlan &plan,
               const std::set<std::string> &allowedChanges = {});

} // namespace braid
