// Finding and loading checkpoints. Everything is checked against the plan
// before the first byte is copied into the arena.
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/ckpt/Safetensors.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

// Checks that `file` holds exactly the tensors `expected` describes, and
// pairs each expected tensor with the file's copy.
absl::Status match(const SafetensorsFile &file, const std::string &path,
                   const std::vector<ckpt::StoredTensor> &expected,
                   std::vector<const SafetensorsTensor *> &found) {
  absl::flat_hash_map<std::string_view, const ckpt::StoredTensor *> byName;
  for (const ckpt::StoredTensor &s : expected)
    byName[s.name] = &s;
  for (const SafetensorsTensor &t : file.tensors())
    if (!byName.contains(t.name))
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' holds tensor \"", absl::CEscape(t.name),
          "\", which the plan does not have: it was saved from a different "
          "model"));
  for (const ckpt::StoredTensor &s : expected) {
    const SafetensorsTensor *t = file.find(s.name);
    if (t == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' lacks tensor \"", absl::CEscape(s.name),
          "\", which the plan has: it was saved from a different model"));
    if (t->dtype != "F32")
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' stores tensor \"", absl::CEscape(s.name),
          "\" as ", t->dtype, " but the plan needs F32"));
    if (t->shape != s.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' stores tensor \"", absl::CEscape(s.name),
          "\" with shape ", shapeString(t->shape), " but the plan needs ",
          shapeString(s.shape), s.transposed ? " (stored transposed)" : ""));
    found.push_back(t);
  }
  return absl::OkStatus();
}

void copyIn(const std::vector<ckpt::StoredTensor> &stored,
            const std::vector<const SafetensorsTensor *> &found,
            const LoadedPlan &plan, uint8_t *arena) {
  for (size_t i = 0; i < stored.size(); ++i) {
    const plan::Tensor &t = plan.proto.tensors(stored[i].planTensor);
    // A tied alias holds the same values as its parameter; the parameter's
    // own entry is the one read.
    if (stored[i].alias)
      continue;
    auto *dst = reinterpret_cast<float *>(arena + t.offset());
    if (stored[i].transposed) {
      std::vector<float> src(t.size_bytes() / sizeof(float));
      std::memcpy(src.data(), found[i]->data.data(), t.size_bytes());
      // The file holds [cols, rows]; transposing it back gives [rows, cols].
      ckpt::transposeInto(src.data(), t.shape(1), t.shape(0), dst);
    } else {
      std::memcpy(dst, found[i]->data.data(), t.size_bytes());
    }
  }
}

absl::StatusOr<int64_t> metadataInt(const SafetensorsFile &file,
                                    const std::string &path,
                                    absl::string_view key) {
  auto it = file.metadata().find(std::string(key));
  int64_t v;
  if (it == file.metadata().end() || !absl::SimpleAtoi(it->second, &v) || v < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint '", path, "' has no valid \"", key,
                     "\" in its metadata (a non-negative integer)"));
  return v;
}

absl::StatusOr<CheckpointState> readState(const SafetensorsFile &file,
                                          const std::string &path) {
  CheckpointState state;
  absl::StatusOr<int64_t> version = metadataInt(file, path, "format_version");
  if (!version.ok())
    return version.status();
  if (*version != kCheckpointFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has format version ", *version,
        " but this runtime reads version ", kCheckpointFormatVersion));
  absl::StatusOr<int64_t> step = metadataInt(file, path, "step");
  absl::StatusOr<int64_t> cursor = metadataInt(file, path, "data_cursor");
  absl::StatusOr<int64_t> total = metadataInt(file, path, "total_steps");
  for (const absl::StatusOr<int64_t> *v : {&step, &cursor, &total})
    if (!v->ok())
      return v->status();
  state.step = *step;
  state.dataCursor = *cursor;
  state.totalSteps = *total;
  if (state.totalSteps == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has total_steps 0 in its metadata"));
  const auto &meta = file.metadata();
  auto seed = meta.find("seed");
  if (seed == meta.end() || !absl::SimpleAtoi(seed->second, &state.seed))
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has no valid \"seed\" in its metadata"));
  auto shuffle = meta.find("shuffle");
  if (shuffle == meta.end() ||
      (shuffle->second != "true" && shuffle->second != "false"))
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path,
        "' has no valid \"shuffle\" in its metadata (true or false)"));
  state.shuffle = shuffle->second == "true";
  auto name = meta.find("plan_name");
  if (name != meta.end())
    state.planName = name->second;
  return state;
}

} // namespace

absl::StatusOr<std::string> findCheckpointDir(const std::string &dir) {
  std::error_code ec;
  const fs::path root(dir);
  if (fs::is_regular_file(root / ckpt::kModelFile, ec))
    return dir;
  if (fs::exists(root, ec) && !fs::is_directory(root, ec))
    return absl::InvalidArgumentError(absl::StrCat(
        "'", dir, "' is not a directory; --resume takes a step-NNNNNN "
        "checkpoint directory or the directory holding them"));
  if (!fs::is_directory(root, ec))
    return absl::NotFoundError(
        absl::StrCat("the checkpoint directory '", dir, "' does not exist"));
  int64_t best = -1;
  fs::path bestDir;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    int64_t step;
    if (absl::StartsWith(name, "step-") &&
        absl::SimpleAtoi(name.substr(5), &step) && step > best &&
        fs::is_regular_file(it->path() / ckpt::kModelFile)) {
      best = step;
      bestDir = it->path();
    }
  }
  if (best < 0)
    return absl::NotFoundError(
        absl::StrCat("'", dir,
                     "' holds no checkpoint: expected model.safetensors in it "
                     "or step-NNNNNN directories below it"));
  return bestDir.string();
}

struct LoadedCheckpoint::Impl {
  SafetensorsFile model;
  SafetensorsFile optimizer;
  std::vector<ckpt::StoredTensor> modelStored;
  std::vector<ckpt::StoredTensor> optimizerStored;
  std::vector<const SafetensorsTensor *> modelFound;
  std::vector<const SafetensorsTensor *> optimizerFound;
};

absl::StatusOr<LoadedCheckpoint> readCheckpoint(const std::string &dir,
                                                const LoadedPlan &plan) {
  const std::string modelPath = (fs::path(dir) / ckpt::kModelFile).string();
  const std::string optPath = (fs::path(dir) / ckpt::kOptimizerFile).string();
  absl::StatusOr<SafetensorsFile> model = SafetensorsFile::read(modelPath);
  if (!model.ok())
    return model.status();
  absl::StatusOr<SafetensorsFile> opt = SafetensorsFile::read(optPath);
  if (!opt.ok())
    return opt.status();
  absl::StatusOr<CheckpointState> state = readState(*opt, optPath);
  if (!state.ok())
    return state.status();
  if (state->seed != plan.proto.train().seed())
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' was trained with seed ", state->seed,
        " but the plan's seed is ", plan.proto.train().seed(),
        ": resume with the plan it was saved from"));

  auto impl = std::make_shared<LoadedCheckpoint::Impl>(
      LoadedCheckpoint::Impl{std::move(*model),
                             std::move(*opt),
                             ckpt::modelTensors(plan),
                             ckpt::optimizerTensors(plan),
                             {},
                             {}});
  if (absl::Status s =
          match(impl->model, modelPath, impl->modelStored, impl->modelFound);
      !s.ok())
    return s;
  if (absl::Status s = match(impl->optimizer, optPath, impl->optimizerStored,
                             impl->optimizerFound);
      !s.ok())
    return s;
  LoadedCheckpoint loaded;
  loaded.impl_ = std::move(impl);
  loaded.state_ = std::move(*state);
  loaded.dir_ = dir;
  return loaded;
}

void LoadedCheckpoint::copyInto(const LoadedPlan &plan, uint8_t *arena) const {
  copyIn(impl_->modelStored, impl_->modelFound, plan, arena);
  copyIn(impl_->optimizerStored, impl_->optimizerFound, plan, arena);
}

} // namespace braid
