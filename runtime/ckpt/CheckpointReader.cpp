// Finding and loading checkpoints. Everything is checked (integrity, state,
// tensors, values) before the first byte is copied into the arena.
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/ckpt/Safetensors.h"
#include "runtime/io/MappedFile.h"
#include "runtime/io/WholeFile.h"
#include "runtime/io/Crc32c.h"

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

// Copies the stored tensors into the arena, each copy under its file's
// SIGBUS guard (so nothing inside a guarded read allocates).
absl::Status copyIn(const SafetensorsFile &file,
                    const std::vector<ckpt::StoredTensor> &stored,
                    const std::vector<const SafetensorsTensor *> &found,
                    const LoadedPlan &plan, uint8_t *arena) {
  for (size_t i = 0; i < stored.size(); ++i) {
    const plan::Tensor &t = plan.proto.tensors(stored[i].planTensor);
    // A tied alias holds the same values as its parameter; the parameter's
    // own entry is the one read.
    if (stored[i].alias)
      continue;
    auto *dst = reinterpret_cast<float *>(arena + t.offset());
    const char *src = found[i]->data.data();
    if (stored[i].transposed) {
      std::vector<float> copy(t.size_bytes() / sizeof(float));
      if (absl::Status s = file.readData(
              [&] { std::memcpy(copy.data(), src, t.size_bytes()); });
          !s.ok())
        return s;
      // The file holds [cols, rows]; transposing it back gives [rows, cols].
      ckpt::transposeInto(copy.data(), t.shape(1), t.shape(0), dst);
    } else if (absl::Status s = file.readData(
                   [&] { std::memcpy(dst, src, t.size_bytes()); });
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Refuses a checkpoint holding a NaN or an infinity, naming the tensor.
absl::Status checkFinite(const SafetensorsFile &file, const std::string &path,
                         const std::vector<const SafetensorsTensor *> &found) {
  for (const SafetensorsTensor *t : found) {
    std::optional<int64_t> bad;
    if (absl::Status s = file.readData([&] {
          bad = ckpt::firstNonFinite(t->data.data(),
                                     t->data.size() / sizeof(float));
        });
        !s.ok())
      return s;
    if (bad)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' stores tensor \"",
          absl::CEscape(t->name), "\" with a non-finite value at index ",
          *bad, ": it cannot be trained on; resume from an earlier "
          "checkpoint"));
  }
  return absl::OkStatus();
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
  absl::StatusOr<int64_t> skipped = metadataInt(file, path, "skipped_steps");
  for (const absl::StatusOr<int64_t> *v : {&step, &cursor, &total, &skipped})
    if (!v->ok())
      return v->status();
  state.step = *step;
  state.dataCursor = *cursor;
  state.totalSteps = *total;
  state.skippedSteps = *skipped;
  if (state.totalSteps == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has total_steps 0 in its metadata"));
  if (state.step > state.totalSteps || state.skippedSteps > state.step)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has step ", state.step, ", total_steps ",
        state.totalSteps, " and skipped_steps ", state.skippedSteps,
        " in its metadata: they contradict each other"));
  const auto &meta = file.metadata();
  auto shuffle = meta.find("shuffle");
  if (shuffle == meta.end() ||
      (shuffle->second != "true" && shuffle->second != "false"))
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path,
        "' has no valid \"shuffle\" in its metadata (true or false)"));
  state.shuffle = shuffle->second == "true";
  for (IdentityField f : planIdentity(plan::Plan())) {
    auto it = meta.find(absl::StrCat("plan.", f.name));
    if (it == meta.end())
      continue;
    f.value = it->second;
    state.identity.push_back(std::move(f));
  }
  auto fingerprint = meta.find("fingerprint");
  if (fingerprint == meta.end() ||
      fingerprint->second != identityFingerprint(state.identity))
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", path, "' has a \"fingerprint\" that does not "
        "match the plan settings in its metadata: the metadata was edited "
        "or damaged"));
  state.fingerprint = fingerprint->second;
  return state;
}

// The identity field `name` of `state` as an integer; 0 when absent.
int64_t identityInt(const CheckpointState &state, absl::string_view name) {
  for (const IdentityField &f : state.identity) {
    int64_t v;
    if (f.name == name && absl::SimpleAtoi(f.value, &v))
      return v;
  }
  return 0;
}

// The step of the directory name, the manifest and the metadata agree, and
// the data position is where `step` steps of the saved batch leave it.
absl::Status checkPosition(const CheckpointState &state,
                           const ckpt::Manifest &manifest,
                           const std::string &dir) {
  const std::string name = fs::path(dir).filename().string();
  int64_t named;
  if (manifest.step != state.step)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' is of step ", state.step,
        " by its metadata but of step ", manifest.step,
        " by its manifest: its files do not belong together"));
  if (absl::StartsWith(name, "step-") &&
      absl::SimpleAtoi(name.substr(5), &named) && named != state.step)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' is of step ", state.step,
        " by its metadata but its directory is named for step ", named,
        ": it was renamed or its files were copied from another step"));
  const int64_t perStep = identityInt(state, "train.global_batch_size");
  int64_t expected;
  if (perStep <= 0 || __builtin_mul_overflow(state.step, perStep, &expected) ||
      expected != state.dataCursor)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' has data position ", state.dataCursor,
        " after ", state.step, " steps, but ", state.step, " steps of ",
        perStep, " samples end at ",
        perStep > 0 && !__builtin_mul_overflow(state.step, perStep, &expected)
            ? absl::StrCat(expected)
            : std::string("no representable position"),
        ": the data position is corrupt"));
  return absl::OkStatus();
}

// Both files of the checkpoint, mapped and checked against the manifest.
absl::StatusOr<std::vector<std::shared_ptr<const MappedFile>>>
openVerified(const std::string &dir, ckpt::Manifest &manifest) {
  const std::string manifestPath = (fs::path(dir) / ckpt::kManifestFile).string();
  absl::StatusOr<std::string> text = readWholeFile(manifestPath, "checkpoint");
  if (absl::IsNotFound(text.status()))
    return absl::NotFoundError(absl::StrCat(
        "the checkpoint '", dir, "' has no ", ckpt::kManifestFile,
        ": it is incomplete, or was written by a braid-run older than "
        "checkpoint format ", kCheckpointFormatVersion));
  if (!text.ok())
    return text.status();
  absl::StatusOr<ckpt::Manifest> parsed =
      ckpt::parseManifest(*text, manifestPath);
  if (!parsed.ok())
    return parsed.status();
  manifest = std::move(*parsed);
  if (manifest.formatVersion != kCheckpointFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' has format version ",
        manifest.formatVersion, " but this runtime reads version ",
        kCheckpointFormatVersion));
  const std::string names[] = {ckpt::kModelFile, ckpt::kOptimizerFile};
  if (manifest.files.size() != 2 || manifest.files[0].name != names[0] ||
      manifest.files[1].name != names[1])
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint manifest '", manifestPath, "' does not list exactly ",
        names[0], " and ", names[1], ": the checkpoint cannot be trusted"));
  std::vector<std::shared_ptr<const MappedFile>> files;
  for (const ckpt::FileDigest &want : manifest.files) {
    const std::string path = (fs::path(dir) / want.name).string();
    absl::StatusOr<MappedFile> file = MappedFile::open(path, "checkpoint");
    if (!file.ok())
      return file.status();
    if (file->size() != want.bytes)
      return absl::DataLossError(absl::StrCat(
          "the checkpoint file '", path, "' has ", file->size(),
          " bytes but its manifest records ", want.bytes,
          ": it was truncated or replaced after the save; resume from "
          "another checkpoint"));
    uint32_t crc = 0;
    if (absl::Status s = file->read([&] {
          crc = crc32c(std::string_view(
              reinterpret_cast<const char *>(file->data()), file->size()));
        });
        !s.ok())
      return s;
    if (crc != want.crc32c)
      return absl::DataLossError(absl::StrCat(
          "the checkpoint file '", path, "' is corrupt: its CRC-32C is ",
          crc32cHex(crc), " but its manifest records ", crc32cHex(want.crc32c),
          " (a byte changed after the save); resume from another "
          "checkpoint"));
    files.push_back(std::make_shared<const MappedFile>(std::move(*file)));
  }
  return files;
}

} // namespace

absl::StatusOr<std::string> findCheckpointDir(const std::string &dir) {
  std::error_code ec;
  const fs::path root(dir);
  if (fs::is_regular_file(root / ckpt::kManifestFile, ec))
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
        fs::is_regular_file(it->path() / ckpt::kManifestFile)) {
      best = step;
      bestDir = it->path();
    }
  }
  if (best < 0)
    return absl::NotFoundError(
        absl::StrCat("'", dir,
                     "' holds no checkpoint: expected manifest.json in it "
                     "or complete step-NNNNNN directories below it"));
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

absl::StatusOr<LoadedCheckpoint>
readCheckpoint(const std::string &dir, const LoadedPlan &plan,
               const std::set<std::string> &allowedChanges) {
  ckpt::Manifest manifest;
  absl::StatusOr<std::vector<std::shared_ptr<const MappedFile>>> files =
      openVerified(dir, manifest);
  if (!files.ok())
    return files.status();
  absl::StatusOr<SafetensorsFile> model =
      SafetensorsFile::fromMapping((*files)[0]);
  if (!model.ok())
    return model.status();
  absl::StatusOr<SafetensorsFile> opt =
      SafetensorsFile::fromMapping((*files)[1]);
  if (!opt.ok())
    return opt.status();
  const std::string &optPath = (*files)[1]->path();
  absl::StatusOr<CheckpointState> state = readState(*opt, optPath);
  if (!state.ok())
    return state.status();
  if (absl::Status s = checkPosition(*state, manifest, dir); !s.ok())
    return s;
  // Before the tensors: "another model" reads better as the settings that
  // differ than as the first tensor that does.
  absl::StatusOr<std::vector<IdentityChange>> changes = compareIdentity(
      state->identity, planIdentity(plan.proto), allowedChanges, dir);
  if (!changes.ok())
    return changes.status();

  auto impl = std::make_shared<LoadedCheckpoint::Impl>(
      LoadedCheckpoint::Impl{std::move(*model),
                             std::move(*opt),
                             ckpt::modelTensors(plan),
                             ckpt::optimizerTensors(plan),
                             {},
                             {}});
  const std::string &modelPath = (*files)[0]->path();
  if (absl::Status s =
          match(impl->model, modelPath, impl->modelStored, impl->modelFound);
      !s.ok())
    return s;
  if (absl::Status s = match(impl->optimizer, optPath, impl->optimizerStored,
                             impl->optimizerFound);
      !s.ok())
    return s;
  if (absl::Status s = checkFinite(impl->model, modelPath, impl->modelFound);
      !s.ok())
    return s;
  if (absl::Status s =
          checkFinite(impl->optimizer, optPath, impl->optimizerFound);
      !s.ok())
    return s;
  LoadedCheckpoint loaded;
  loaded.impl_ = std::move(impl);
  loaded.state_ = std::move(*state);
  loaded.changes_ = std::move(*changes);
  loaded.dir_ = dir;
  return loaded;
}

absl::Status LoadedCheckpoint::copyInto(const LoadedPlan &plan,
                                        uint8_t *arena) const {
  if (absl::Status s = copyIn(impl_->model, impl_->modelStored,
                              impl_->modelFound, plan, arena);
      !s.ok())
    return s;
  return copyIn(impl_->optimizer, impl_->optimizerStored,
                impl_->optimizerFound, plan, arena);
}

} // namespace braid
