// Finding and loading checkpoints. Everything is checked (integrity, state,
// tensors, values) before the first byte is copied into the arena.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/CheckpointTensors.h"
#include "runtime/ckpt/Safetensors.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/io/MappedFile.h"
#include "runtime/io/WholeFile.h"
#include "runtime/io/Crc32c.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

// `s` with unprintable bytes escaped, for messages.
std::string escaped(std::string_view s) {
  return absl::CEscape(absl::string_view(s.data(), s.size()));
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

// A tensor of the checkpoint: the file holding it (an index into the
// checkpoint's parsed files) and its entry there.
struct Found {
  size_t file = 0;
  const SafetensorsTensor *tensor = nullptr;
};

// The safetensors files of a checkpoint, parsed, with their paths.
struct ParsedFiles {
  std::vector<SafetensorsFile> files;
  std::vector<std::string> paths;
};

// The tensors of some files of a checkpoint, in file order and by name.
struct TensorSet {
  std::vector<std::pair<std::string_view, Found>> inOrder;
  absl::flat_hash_map<std::string_view, Found> byName;
};

// The tensors of files [first, last) of `parsed`; a name stored twice is
// refused, naming both files.
absl::StatusOr<TensorSet> collect(const ParsedFiles &parsed, size_t first,
                                  size_t last) {
  TensorSet set;
  for (size_t f = first; f < last; ++f)
    for (const SafetensorsTensor &t : parsed.files[f].tensors()) {
      auto [it, fresh] = set.byName.try_emplace(t.name, Found{f, &t});
      if (!fresh)
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint stores tensor \"", escaped(t.name),
            "\" twice, in '", parsed.paths[it->second.file], "' and in '",
            parsed.paths[f], "': its files do not belong together"));
      set.inOrder.emplace_back(t.name, Found{f, &t});
    }
  return set;
}

// Checks that `set` holds exactly the tensors `expected` describes, and
// pairs each expected tensor with its copy. `origin` names the file (or the
// index of the files) in messages.
absl::Status match(const TensorSet &set, const ParsedFiles &parsed,
                   const std::string &origin,
                   const std::vector<ckpt::StoredTensor> &expected,
                   std::vector<Found> &found) {
  absl::flat_hash_map<std::string_view, const ckpt::StoredTensor *> byName;
  for (const ckpt::StoredTensor &s : expected)
    byName[s.name] = &s;
  for (const auto &[name, where] : set.inOrder)
    if (!byName.contains(name))
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", parsed.paths[where.file], "' holds tensor \"",
          escaped(name),
          "\", which the plan does not have: it was saved from a different "
          "model"));
  for (const ckpt::StoredTensor &s : expected) {
    auto it = set.byName.find(s.name);
    if (it == set.byName.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", origin, "' lacks tensor \"", escaped(s.name),
          "\", which the plan has: it was saved from a different model"));
    const SafetensorsTensor *t = it->second.tensor;
    const std::string &path = parsed.paths[it->second.file];
    if (t->dtype != "F32")
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' stores tensor \"", escaped(s.name),
          "\" as ", t->dtype, " but the plan needs F32"));
    if (t->shape != s.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", path, "' stores tensor \"", escaped(s.name),
          "\" with shape ", shapeString(t->shape), " but the plan needs ",
          shapeString(s.shape), s.transposed ? " (stored transposed)" : ""));
    found.push_back(it->second);
  }
  return absl::OkStatus();
}

// Copies the stored tensors into the arena, each copy under its file's
// SIGBUS guard (so nothing inside a guarded read allocates).
absl::Status copyIn(const ParsedFiles &parsed,
                    const std::vector<ckpt::StoredTensor> &stored,
                    const std::vector<Found> &found, const LoadedPlan &plan,
                    uint8_t *arena, const absl::flat_hash_set<uint32_t> *only) {
  for (size_t i = 0; i < stored.size(); ++i) {
    const plan::Tensor &t = plan.proto.tensors(stored[i].planTensor);
    // A tied alias holds the same values as its parameter; the parameter's
    // own entry is the one read.
    if (stored[i].alias)
      continue;
    if (only != nullptr && !only->contains(stored[i].planTensor))
      continue;
    const SafetensorsFile &file = parsed.files[found[i].file];
    auto *dst = reinterpret_cast<float *>(
        arena + plan.imageOffset(stored[i].planTensor) + stored[i].offset);
    const char *src = found[i].tensor->data.data();
    const uint64_t bytes = stored[i].bytes;
    if (stored[i].transposed) {
      std::vector<float> copy(bytes / sizeof(float));
      if (absl::Status s =
              file.readData([&] { std::memcpy(copy.data(), src, bytes); });
          !s.ok())
        return s;
      // The file holds [cols, rows]; transposing it back gives [rows, cols].
      ckpt::transposeInto(copy.data(), t.shape(1), t.shape(0), dst);
    } else if (absl::Status s =
                   file.readData([&] { std::memcpy(dst, src, bytes); });
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Refuses a checkpoint holding a NaN or an infinity, naming the tensor.
absl::Status checkFinite(const ParsedFiles &parsed,
                         const std::vector<Found> &found) {
  for (const Found &f : found) {
    const SafetensorsTensor *t = f.tensor;
    std::optional<int64_t> bad;
    if (absl::Status s = parsed.files[f.file].readData([&] {
          bad = ckpt::firstNonFinite(t->data.data(),
                                     t->data.size() / sizeof(float));
        });
        !s.ok())
      return s;
    if (bad)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint '", parsed.paths[f.file], "' stores tensor \"",
          escaped(t->name), "\" with a non-finite value at index ", *bad,
          ": it cannot be trained on; resume from an earlier "
          "checkpoint"));
  }
  return absl::OkStatus();
}

// Refuses a format version this runtime does not read.
absl::Status checkVersion(int64_t version, const std::string &origin) {
  if (version >= kOldestCheckpointFormatVersion &&
      version <= kCheckpointFormatVersion)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the checkpoint '", origin, "' has format version ", version,
      " but this runtime reads versions ", kOldestCheckpointFormatVersion,
      " to ", kCheckpointFormatVersion,
      version > kCheckpointFormatVersion
          ? ": it was saved by a newer braid-run; resume with that one"
          : ""));
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

// The run's state from optimizer.safetensors' metadata; `version` is set to
// the format version it records.
absl::StatusOr<CheckpointState> readState(const SafetensorsFile &file,
                                          const std::string &path,
                                          int64_t &version) {
  CheckpointState state;
  absl::StatusOr<int64_t> saved = metadataInt(file, path, "format_version");
  if (!saved.ok())
    return saved.status();
  if (absl::Status s = checkVersion(*saved, path); !s.ok())
    return s;
  version = *saved;
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

// Every file of the checkpoint, mapped and checked against the manifest.
struct VerifiedFiles {
  ckpt::Manifest manifest;
  std::string manifestPath;
  // In the manifest's order.
  std::vector<std::shared_ptr<const MappedFile>> files;

  // The file called `name`, or null when the manifest does not list it.
  std::shared_ptr<const MappedFile> find(std::string_view name) const {
    for (size_t i = 0; i < files.size(); ++i)
      if (manifest.files[i].name == name)
        return files[i];
    return nullptr;
  }
};

absl::StatusOr<VerifiedFiles> openVerified(const std::string &dir) {
  VerifiedFiles verified;
  verified.manifestPath = (fs::path(dir) / ckpt::kManifestFile).string();
  const std::string &manifestPath = verified.manifestPath;
  absl::StatusOr<std::string> text = readWholeFile(manifestPath, "checkpoint");
  if (absl::IsNotFound(text.status()))
    return absl::NotFoundError(absl::StrCat(
        "the checkpoint '", dir, "' has no ", ckpt::kManifestFile,
        ": it is incomplete, or was written by a braid-run older than "
        "checkpoint format ",
        kOldestCheckpointFormatVersion));
  if (!text.ok())
    return text.status();
  absl::StatusOr<ckpt::Manifest> parsed =
      ckpt::parseManifest(*text, manifestPath);
  if (!parsed.ok())
    return parsed.status();
  verified.manifest = std::move(*parsed);
  if (absl::Status s = checkVersion(verified.manifest.formatVersion, dir);
      !s.ok())
    return s;
  for (const ckpt::FileDigest &want : verified.manifest.files) {
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
    verified.files.push_back(
        std::make_shared<const MappedFile>(std::move(*file)));
  }
  return verified;
}

// The files that hold the parameters: model.safetensors, or the shards the
// index names. Every file the manifest lists belongs to the layout.
struct ModelLayout {
  std::vector<std::shared_ptr<const MappedFile>> files;
  // Sharded layouts only.
  std::optional<ckpt::ShardIndex> index;
  std::string indexPath;
};

absl::StatusOr<ModelLayout> modelLayout(const std::string &dir,
                                        const VerifiedFiles &verified) {
  auto untrusted = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint manifest '", verified.manifestPath, "' ",
                     what, ": the checkpoint cannot be trusted"));
  };
  if (verified.find(ckpt::kOptimizerFile) == nullptr)
    return untrusted(absl::StrCat("does not list ", ckpt::kOptimizerFile));
  std::shared_ptr<const MappedFile> single = verified.find(ckpt::kModelFile);
  std::shared_ptr<const MappedFile> indexFile =
      verified.find(ckpt::kModelIndexFile);
  if ((single == nullptr) == (indexFile == nullptr))
    return untrusted(absl::StrCat("lists ", single ? "both " : "neither ",
                                  ckpt::kModelFile, single ? " and " : " nor ",
                                  ckpt::kModelIndexFile));
  ModelLayout layout;
  absl::flat_hash_set<const MappedFile *> named;
  if (single != nullptr) {
    layout.files.push_back(single);
  } else {
    layout.indexPath = indexFile->path();
    std::string text(indexFile->size(), '\0');
    if (absl::Status s = indexFile->read(
            [&] { std::memcpy(text.data(), indexFile->data(), text.size()); });
        !s.ok())
      return s;
    absl::StatusOr<ckpt::ShardIndex> index =
        ckpt::parseShardIndex(text, layout.indexPath);
    if (!index.ok())
      return index.status();
    for (const auto &[tensor, file] : index->weightMap) {
      std::shared_ptr<const MappedFile> shard = verified.find(file);
      const bool special =
          file == ckpt::kConfigFile || file == ckpt::kOptimizerFile ||
          file == ckpt::kModelIndexFile || file == ckpt::kManifestFile;
      if (shard == nullptr || special) {
        std::error_code ec;
        const bool exists = fs::exists(fs::path(dir) / file, ec);
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint index '", layout.indexPath, "' maps tensor \"",
            escaped(tensor), "\" to '", escaped(file), "', ",
            special  ? "which is not a model shard"
            : exists ? "which the checkpoint's manifest does not list, so it "
                       "cannot be verified"
                     : "which the checkpoint does not have",
            ": the checkpoint is incomplete or its files do not belong "
            "together"));
      }
      named.insert(shard.get());
    }
    layout.index = std::move(*index);
    // The shards in the manifest's order, which is their numbers'.
    for (const std::shared_ptr<const MappedFile> &file : verified.files)
      if (named.contains(file.get()))
        layout.files.push_back(file);
  }
  for (size_t i = 0; i < verified.files.size(); ++i) {
    const std::string &name = verified.manifest.files[i].name;
    if (name != ckpt::kConfigFile && name != ckpt::kOptimizerFile &&
        name != ckpt::kModelIndexFile &&
        std::find(layout.files.begin(), layout.files.end(),
                  verified.files[i]) == layout.files.end())
      return untrusted(absl::StrCat("lists '", escaped(name), "', which ",
                                    single ? "is not a file of a checkpoint"
                                           : "its index maps no tensor to"));
  }
  return layout;
}

// A sharded checkpoint's index and shards agree: every tensor of a shard is
// mapped to that shard, every mapped tensor is there, and total_size is
// what they hold.
absl::Status checkIndex(const ModelLayout &layout, const TensorSet &set,
                        const ParsedFiles &parsed) {
  absl::flat_hash_map<std::string_view, std::string_view> mapped;
  for (const auto &[tensor, file] : layout.index->weightMap)
    mapped[tensor] = file;
  uint64_t total = 0;
  for (const auto &[name, where] : set.inOrder) {
    const std::string &path = parsed.paths[where.file];
    const std::string shard = fs::path(path).filename().string();
    auto it = mapped.find(name);
    if (it == mapped.end() || it->second != shard)
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint shard '", path, "' holds tensor \"", escaped(name),
          "\", which its index '", layout.indexPath,
          it == mapped.end()
              ? "' does not name"
              : absl::StrCat("' maps to '", escaped(it->second), "'"),
          ": its files do not belong together"));
    total += where.tensor->data.size();
  }
  for (const auto &[tensor, file] : layout.index->weightMap)
    if (!set.byName.contains(tensor))
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint index '", layout.indexPath, "' maps tensor \"",
          escaped(tensor), "\" to '", escaped(file),
          "', which does not hold it: its files do not belong together"));
  if (layout.index->totalSize != total)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint index '", layout.indexPath, "' gives total_size ",
        layout.index->totalSize, " but its shards hold ", total,
        " bytes of tensors: its files do not belong together"));
  return absl::OkStatus();
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

std::vector<std::string> checkpointFilePaths(const std::string &dir) {
  const fs::path root(dir);
  std::vector<std::string> names = {ckpt::kConfigFile, ckpt::kModelFile,
                                    ckpt::kModelIndexFile,
                                    ckpt::kOptimizerFile};
  absl::StatusOr<std::string> text =
      readWholeFile((root / ckpt::kManifestFile).string(), "checkpoint");
  absl::StatusOr<ckpt::Manifest> manifest =
      text.ok() ? ckpt::parseManifest(*text, dir) : text.status();
  if (manifest.ok()) {
    names.clear();
    for (const ckpt::FileDigest &f : manifest->files)
      names.push_back(f.name);
  }
  std::vector<std::string> paths = {(root / ckpt::kManifestFile).string()};
  for (const std::string &name : names)
    paths.push_back((root / name).string());
  return paths;
}

struct LoadedCheckpoint::Impl {
  // The model files (one, or the shards), then optimizer.safetensors.
  ParsedFiles parsed;
  std::vector<ckpt::StoredTensor> modelStored;
  std::vector<ckpt::StoredTensor> optimizerStored;
  std::vector<Found> modelFound;
  std::vector<Found> optimizerFound;
};

absl::StatusOr<LoadedCheckpoint>
readCheckpoint(const std::string &dir, const LoadedPlan &plan,
               const std::set<std::string> &allowedChanges) {
  absl::StatusOr<VerifiedFiles> verified = openVerified(dir);
  if (!verified.ok())
    return verified.status();
  absl::StatusOr<ModelLayout> layout = modelLayout(dir, *verified);
  if (!layout.ok())
    return layout.status();
  auto impl = std::make_shared<LoadedCheckpoint::Impl>();
  ParsedFiles &parsed = impl->parsed;
  std::vector<std::shared_ptr<const MappedFile>> mapped = layout->files;
  mapped.push_back(verified->find(ckpt::kOptimizerFile));
  parsed.files.reserve(mapped.size());
  for (std::shared_ptr<const MappedFile> &file : mapped) {
    parsed.paths.push_back(file->path());
    absl::StatusOr<SafetensorsFile> st =
        SafetensorsFile::fromMapping(std::move(file));
    if (!st.ok())
      return st.status();
    parsed.files.push_back(std::move(*st));
  }
  const size_t optIndex = parsed.files.size() - 1;
  absl::StatusOr<TensorSet> modelSet = collect(parsed, 0, optIndex);
  if (!modelSet.ok())
    return modelSet.status();
  if (layout->index)
    if (absl::Status s = checkIndex(*layout, *modelSet, parsed); !s.ok())
      return s;
  const std::string &optPath = parsed.paths[optIndex];
  int64_t version = 0;
  absl::StatusOr<CheckpointState> state =
      readState(parsed.files[optIndex], optPath, version);
  if (!state.ok())
    return state.status();
  if (version != verified->manifest.formatVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint '", dir, "' is of format version ", version,
        " by its metadata but of version ", verified->manifest.formatVersion,
        " by its manifest: its files do not belong together"));
  if (absl::Status s = checkPosition(*state, verified->manifest, dir); !s.ok())
    return s;
  // Before the tensors: "another model" reads better as the settings that
  // differ than as the first tensor that does.
  absl::StatusOr<std::vector<IdentityChange>> changes = compareIdentity(
      state->identity, planIdentity(plan.proto), allowedChanges, dir);
  if (!changes.ok())
    return changes.status();

  impl->modelStored = ckpt::modelTensors(plan);
  impl->optimizerStored = ckpt::optimizerTensors(plan);
  const std::string &modelOrigin =
      layout->index ? layout->indexPath : parsed.paths[0];
  if (absl::Status s = match(*modelSet, parsed, modelOrigin, impl->modelStored,
                             impl->modelFound);
      !s.ok())
    return s;
  absl::StatusOr<TensorSet> optSet = collect(parsed, optIndex, optIndex + 1);
  if (!optSet.ok())
    return optSet.status();
  if (absl::Status s = match(*optSet, parsed, optPath, impl->optimizerStored,
                             impl->optimizerFound);
      !s.ok())
    return s;
  if (absl::Status s = checkFinite(parsed, impl->modelFound); !s.ok())
    return s;
  if (absl::Status s = checkFinite(parsed, impl->optimizerFound); !s.ok())
    return s;
  LoadedCheckpoint loaded;
  loaded.impl_ = std::move(impl);
  loaded.state_ = std::move(*state);
  loaded.changes_ = std::move(*changes);
  loaded.dir_ = dir;
  return loaded;
}

absl::Status
LoadedCheckpoint::copyInto(const LoadedPlan &plan, uint8_t *arena,
                           const absl::flat_hash_set<uint32_t> *only) const {
  if (absl::Status s = copyIn(impl_->parsed, impl_->modelStored,
                              impl_->modelFound, plan, arena, only);
      !s.ok())
    return s;
  return copyIn(impl_->parsed, impl_->optimizerStored, impl_->optimizerFound,
                plan, arena, only);
}

} // namespace braid
