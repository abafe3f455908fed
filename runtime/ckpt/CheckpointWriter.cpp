// Saving a checkpoint atomically: every value is checked for NaN and
// infinity, every file is written and flushed into a hidden temporary
// directory with the manifest last, and the directory is then renamed to
// step-NNNNNN.
#include <cerrno>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/ckpt/HfConfig.h"
#include "runtime/ckpt/Safetensors.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/Crc32c.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

absl::Status ioError(absl::string_view what, const fs::path &path,
                     const std::error_code &ec) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot ", what, " '", path.string(), "': ", ec.message()));
}

// The stored tensors with their bytes; transposed copies live in `scratch`.
std::vector<SafetensorsTensor>
describe(const std::vector<ckpt::StoredTensor> &stored, const LoadedPlan &plan,
         const uint8_t *arena, std::vector<std::unique_ptr<float[]>> &scratch) {
  std::vector<SafetensorsTensor> out;
  for (const ckpt::StoredTensor &s : stored) {
    const plan::Tensor &t = plan.proto.tensors(s.planTensor);
    const auto *data = reinterpret_cast<const float *>(
        arena + plan.imageOffset(s.planTensor) + s.offset);
    if (s.transposed) {
      const int64_t rows = t.shape(0), cols = t.shape(1);
      scratch.push_back(std::make_unique<float[]>(rows * cols));
      ckpt::transposeInto(data, rows, cols, scratch.back().get());
      data = scratch.back().get();
    }
    out.push_back(
        {s.name, "F32", s.shape,
         std::string_view(reinterpret_cast<const char *>(data), s.bytes)});
  }
  return out;
}

// Refuses the save when a value to be stored is NaN or infinite.
absl::Status checkFinite(const std::vector<ckpt::StoredTensor> &stored,
                         const LoadedPlan &plan, const uint8_t *arena,
                         int64_t step) {
  for (const ckpt::StoredTensor &s : stored) {
    std::optional<int64_t> bad = ckpt::firstNonFinite(
        reinterpret_cast<const float *>(arena + plan.imageOffset(s.planTensor) +
                                        s.offset),
        static_cast<int64_t>(s.bytes / sizeof(float)));
    if (bad)
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to save the checkpoint of step ", step, ": tensor \"",
          s.name, "\" holds a non-finite value at index ", *bad,
          "; earlier checkpoints are kept"));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> stateMetadata(const CheckpointState &state) {
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"format_version", absl::StrCat(kCheckpointFormatVersion)},
      {"step", absl::StrCat(state.step)},
      {"data_cursor", absl::StrCat(state.dataCursor)},
      {"total_steps", absl::StrCat(state.totalSteps)},
      {"shuffle", state.shuffle ? "true" : "false"},
      {"skipped_steps", absl::StrCat(state.skippedSteps)},
      {"fingerprint", state.fingerprint},
  };
  for (const IdentityField &f : state.identity)
    metadata[absl::StrCat("plan.", f.name)] = f.value;
  return metadata;
}

// Writes a small text file of the checkpoint and returns its digest.
absl::StatusOr<ckpt::FileDigest> writeText(const fs::path &path,
                                           std::string_view text) {
  if (absl::Status s = writeFileAtomically(path.string(), text); !s.ok())
    return s;
  return ckpt::FileDigest{path.filename().string(), text.size(), crc32c(text)};
}

// The parameters: model.safetensors when they fit in one shard, otherwise
// the shards and their index, as transformers' save_pretrained writes them.
absl::Status writeModel(const fs::path &dir, const LoadedPlan &plan,
                        const uint8_t *arena, const CheckpointLayout &layout,
                        ckpt::Manifest &manifest) {
  const std::vector<ckpt::StoredTensor> stored = ckpt::modelTensors(plan);
  std::vector<uint64_t> bytes;
  for (const ckpt::StoredTensor &s : stored)
    bytes.push_back(s.bytes);
  const std::vector<std::vector<size_t>> shards =
      ckpt::splitIntoShards(bytes, layout.maxShardBytes);
  std::vector<std::unique_ptr<float[]>> scratch;
  if (shards.size() <= 1) {
    absl::StatusOr<ckpt::FileDigest> model = writeSafetensors(
        (dir / ckpt::kModelFile).string(),
        describe(stored, plan, arena, scratch), {{"format", "pt"}});
    if (!model.ok())
      return model.status();
    manifest.files.push_back(*model);
    return absl::OkStatus();
  }
  ckpt::ShardIndex index;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string name = ckpt::shardFileName(k + 1, shards.size());
    std::vector<ckpt::StoredTensor> part;
    for (size_t i : shards[k]) {
      part.push_back(stored[i]);
      index.weightMap.emplace_back(stored[i].name, name);
      index.totalSize += bytes[i];
    }
    // Transposed copies live only as long as their shard is written.
    scratch.clear();
    absl::StatusOr<ckpt::FileDigest> shard = writeSafetensors(
        (dir / name).string(), describe(part, plan, arena, scratch),
        {{"format", "pt"}});
    if (!shard.ok())
      return shard.status();
    manifest.files.push_back(*shard);
  }
  absl::StatusOr<ckpt::FileDigest> written =
      writeText(dir / ckpt::kModelIndexFile, ckpt::formatShardIndex(index));
  if (!written.ok())
    return written.status();
  manifest.files.push_back(*written);
  return absl::OkStatus();
}

absl::Status writeFiles(const fs::path &dir, const LoadedPlan &plan,
                        const uint8_t *arena, const CheckpointState &state,
                        const CheckpointLayout &layout) {
  ckpt::Manifest manifest;
  manifest.formatVersion = kCheckpointFormatVersion;
  manifest.step = state.step;
  absl::StatusOr<ckpt::FileDigest> config =
      writeText(dir / ckpt::kConfigFile, ckpt::huggingFaceConfig(plan.proto));
  if (!config.ok())
    return config.status();
  manifest.files.push_back(*config);
  if (absl::Status s = writeModel(dir, plan, arena, layout, manifest); !s.ok())
    return s;
  std::vector<std::unique_ptr<float[]>> scratch;
  absl::StatusOr<ckpt::FileDigest> optimizer = writeSafetensors(
      (dir / ckpt::kOptimizerFile).string(),
      describe(ckpt::optimizerTensors(plan), plan, arena, scratch),
      stateMetadata(state));
  if (!optimizer.ok())
    return optimizer.status();
  manifest.files.push_back(*optimizer);
  return writeFileAtomically((dir / ckpt::kManifestFile).string(),
                             ckpt::formatManifest(manifest));
}

// A leftover of saveCheckpoint: ".step-NNNNNN.tmp-PID" or ".old-PID".
struct Leftover {
  std::string stepDir; // "step-NNNNNN"
  bool old = false;    // a checkpoint moved aside, not a half-written one
  pid_t pid = 0;
};

std::optional<Leftover> parseLeftover(const std::string &name) {
  if (!absl::StartsWith(name, ".step-"))
    return std::nullopt;
  for (bool old : {false, true}) {
    const std::string tag = old ? ".old-" : ".tmp-";
    size_t at = name.rfind(tag);
    int pid;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(name.substr(at + tag.size()), &pid) || pid <= 0)
      continue;
    return Leftover{name.substr(1, at - 1), old, pid};
  }
  return std::nullopt;
}

bool processRuns(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

} // namespace

std::string checkpointDirName(int64_t step) {
  return absl::StrFormat("step-%06d", step);
}

std::vector<std::string> recoverCheckpointDir(const std::string &rootDir) {
  std::vector<std::string> notes;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(rootDir, ec), end; !ec && it != end;
       it.increment(ec))
    entries.push_back(it->path());
  for (const fs::path &path : entries) {
    std::optional<Leftover> left = parseLeftover(path.filename().string());
    if (!left || left->pid == ::getpid() || processRuns(left->pid))
      continue;
    const fs::path finalDir = fs::path(rootDir) / left->stepDir;
    if (left->old && !fs::exists(finalDir, ec)) {
      fs::rename(path, finalDir, ec);
      if (!ec)
        notes.push_back(absl::StrCat(
            "restored the checkpoint ", finalDir.string(),
            ", which process ", left->pid,
            " had moved aside to replace it when it died"));
      continue;
    }
    fs::remove_all(path, ec);
    if (!ec)
      notes.push_back(absl::StrCat("removed ", path.string(),
                                   ", left unfinished by process ", left->pid));
  }
  return notes;
}

absl::StatusOr<std::string> saveCheckpoint(const std::string &rootDir,
                                           const LoadedPlan &plan,
                                           const uint8_t *arena,
                                           const CheckpointState &state,
                                           const CheckpointLayout &layout) {
  if (absl::Status s =
          checkFinite(ckpt::modelTensors(plan), plan, arena, state.step);
      !s.ok())
    return s;
  if (absl::Status s =
          checkFinite(ckpt::optimizerTensors(plan), plan, arena, state.step);
      !s.ok())
    return s;
  const fs::path root(rootDir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return ioError("create the checkpoint directory", root, ec);
  const std::string name = checkpointDirName(state.step);
  const fs::path finalDir = root / name;
  const fs::path tempDir = root / absl::StrCat(".", name, ".tmp-", ::getpid());
  const fs::path oldDir = root / absl::StrCat(".", name, ".old-", ::getpid());
  fs::remove_all(tempDir, ec);
  if (!fs::create_directory(tempDir, ec) || ec)
    return ioError("create", tempDir,
                   ec ? ec : std::make_error_code(std::errc::file_exists));
  if (absl::Status s = writeFiles(tempDir, plan, arena, state, layout);
      !s.ok()) {
    std::error_code ignored;
    fs::remove_all(tempDir, ignored);
    return s;
  }
  syncDirectory(tempDir.string());
  // A checkpoint of the same step is moved aside first: rename cannot
  // replace a non-empty directory. A crash between the two renames leaves
  // it as ".old-PID", which recoverCheckpointDir puts back.
  bool replaced = false;
  if (fs::exists(finalDir, ec)) {
    fs::remove_all(oldDir, ec);
    fs::rename(finalDir, oldDir, ec);
    if (ec) {
      std::error_code ignored;
      fs::remove_all(tempDir, ignored);
      return ioError("replace the old checkpoint", finalDir, ec);
    }
    replaced = true;
  }
  fs::rename(tempDir, finalDir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tempDir, ignored);
    if (replaced)
      fs::rename(oldDir, finalDir, ignored);
    return ioError("move the checkpoint into place at", finalDir, ec);
  }
  syncDirectory(root.string());
  if (replaced)
    fs::remove_all(oldDir, ec);
  return finalDir.string();
}

} // namespace braid
