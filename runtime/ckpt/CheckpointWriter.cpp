// Saving a checkpoint atomically: both files are written and flushed into a
// hidden temporary directory, which is then renamed to step-NNNNNN.
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/ckpt/Safetensors.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

// Makes a rename inside `dir` durable.
void syncDirectory(const fs::path &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

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
    const auto *data = reinterpret_cast<const float *>(arena + t.offset());
    if (s.transposed) {
      const int64_t rows = t.shape(0), cols = t.shape(1);
      scratch.push_back(std::make_unique<float[]>(rows * cols));
      ckpt::transposeInto(data, rows, cols, scratch.back().get());
      data = scratch.back().get();
    }
    out.push_back({s.name, "F32", s.shape,
                   std::string_view(reinterpret_cast<const char *>(data),
                                    t.size_bytes())});
  }
  return out;
}

absl::Status writeFiles(const fs::path &dir, const LoadedPlan &plan,
                        const uint8_t *arena, const CheckpointState &state) {
  std::vector<std::unique_ptr<float[]>> scratch;
  if (absl::Status s = writeSafetensors(
          (dir / ckpt::kModelFile).string(),
          describe(ckpt::modelTensors(plan), plan, arena, scratch),
          {{"format", "pt"}});
      !s.ok())
    return s;
  scratch.clear();
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"format_version", absl::StrCat(kCheckpointFormatVersion)},
      {"step", absl::StrCat(state.step)},
      {"data_cursor", absl::StrCat(state.dataCursor)},
      {"seed", absl::StrCat(state.seed)},
      {"total_steps", absl::StrCat(state.totalSteps)},
      {"shuffle", state.shuffle ? "true" : "false"},
      {"plan_name", state.planName},
  };
  return writeSafetensors(
      (dir / ckpt::kOptimizerFile).string(),
      describe(ckpt::optimizerTensors(plan), plan, arena, scratch), metadata);
}

} // namespace

std::string checkpointDirName(int64_t step) {
  return absl::StrFormat("step-%06d", step);
}

absl::StatusOr<std::string> saveCheckpoint(const std::string &rootDir,
                                           const LoadedPlan &plan,
                                           const uint8_t *arena,
                                           const CheckpointState &state) {
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
  if (absl::Status s = writeFiles(tempDir, plan, arena, state); !s.ok()) {
    std::error_code ignored;
    fs::remove_all(tempDir, ignored);
    return s;
  }
  syncDirectory(tempDir);
  // A checkpoint of the same step is moved aside first: rename cannot
  // replace a non-empty directory.
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
    return ioError("move the checkpoint into place at", finalDir, ec);
  }
  syncDirectory(root);
  if (replaced)
    fs::remove_all(oldDir, ec);
  return finalDir.string();
}

} // namespace braid
