// Checkpoint layout (names, transposition, tied aliases, metadata), atomic
// saving, finding the latest checkpoint, and refusing mismatched ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/RunIdentity.h"
#include "runtime/ckpt/Safetensors.h"
#include "runtime/io/WholeFile.h"
#include "runtime/io/AtomicFile.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using test::freshDir;
using test::TinyModelOptions;
using test::tinyTrainer;

TinyModelOptions tiedAndTransposed() {
  TinyModelOptions o;
  o.transposedHead = true;
  o.embeddingAlias = "tied.embedding";
  return o;
}

// A checkpoint of one trained step of the tiny model, in a fresh directory.
std::string savedCheckpoint(const std::string &name,
                            const TinyModelOptions &model) {
  auto trainer = tinyTrainer(model);
  EXPECT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir = trainer->saveCheckpoint(freshDir(name));
  EXPECT_TRUE(dir.ok()) << dir.status();
  return *dir;
}

absl::Status readAgainst(const std::string &dir,
                         const TinyModelOptions &model) {
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(test::tinyModelPlan(model).SerializeAsString(),
               test::testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(plan.ok());
  return readCheckpoint(dir, *plan).status();
}

#define EXPECT_MESSAGE(status, fragment)                                       \
  do {                                                                         \
    absl::Status s_ = (status);                                                \
    ASSERT_FALSE(s_.ok());                                                     \
    EXPECT_NE(std::string(s_.message()).find(fragment), std::string::npos)     \
        << "message: " << s_.message();                                        \
  } while (false)

TEST(Checkpoint, UsesHuggingFaceNamesTranspositionAndAliases) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir =
      trainer->saveCheckpoint(freshDir("ckpt-layout"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(fs::path(*dir).filename(), "step-000001");

  absl::StatusOr<SafetensorsFile> model =
      SafetensorsFile::read(*dir + "/model.safetensors");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> names;
  for (const SafetensorsTensor &t : model->tensors())
    names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.embed_tokens.weight", "tied.embedding",
                       "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(model->metadata().at("format"), "pt");

  // lm_head is [256, 16] inside Braid and [16, 256] in the file.
  const SafetensorsTensor *head = model->find("lm_head.weight");
  EXPECT_EQ(head->shape, (std::vector<int64_t>{16, 256}));
  absl::Span<float> inside = *trainer->f32Tensor("lm_head.weight");
  const auto *stored = reinterpret_cast<const float *>(head->data.data());
  for (int r = 0; r < 256; r += 17)
    for (int c = 0; c < 16; ++c)
      ASSERT_EQ(stored[c * 256 + r], inside[r * 16 + c]);
  // The alias holds exactly the embedding's bytes.
  EXPECT_EQ(model->find("tied.embedding")->data,
            model->find("model.embed_tokens.weight")->data);

  absl::StatusOr<SafetensorsFile> opt =
      SafetensorsFile::read(*dir + "/optimizer.safetensors");
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ(opt->tensors().size(), 6u);
  ASSERT_NE(opt->find("lm_head.weight.exp_avg_sq"), nullptr);
  EXPECT_EQ(opt->find("lm_head.weight.exp_avg")->shape,
            (std::vector<int64_t>{256, 16}));
  const std::map<std::string, std::string> expected = {
      {"format", "pt"},         {"format_version", "3"},
      {"step", "1"},            {"data_cursor", "4"},
      {"total_steps", "6"},     {"shuffle", "false"},
      {"skipped_steps", "0"},   {"plan.name", "tiny-model"},
      {"plan.train.seed", "1234"}, {"plan.train.lr", "0.01"},
      {"plan.train.seq_len", "8"}, {"plan.model.hidden_size", "16"},
      {"plan.train.decay", "cosine"}, {"plan.train.precision", "fp32"}};
  for (const auto &[key, value] : expected)
    EXPECT_EQ(opt->metadata().at(key), value) << key;
  // Every identity field is stored, and the fingerprint covers them.
  EXPECT_EQ(opt->metadata().at("fingerprint"),
            identityFingerprint(planIdentity(trainer->plan().proto)));

  // The manifest lists every other file with its size and checksum.
  absl::StatusOr<std::string> text =
      readWholeFile(*dir + "/manifest.json", "test");
  ASSERT_TRUE(text.ok());
  absl::StatusOr<ckpt::Manifest> manifest =
      ckpt::parseManifest(*text, "manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->step, 1);
  std::vector<std::string> listed;
  for (const ckpt::FileDigest &f : manifest->files)
    listed.push_back(f.name);
  EXPECT_EQ(listed,
            (std::vector<std::string>{"config.json", "model.safetensors",
                                      "optimizer.safetensors"}));
  for (const ckpt::FileDigest &f : manifest->files) {
    absl::StatusOr<ckpt::FileDigest> onDisk = ckpt::digestFile(*dir + "/" + f.name);
    ASSERT_TRUE(onDisk.ok());
    EXPECT_EQ(onDisk->bytes, f.bytes) << f.name;
    EXPECT_EQ(onDisk->crc32c, f.crc32c) << f.name;
  }
}

// The plan's enums are recorded as the words checkpoints always held, so
// that checkpoints of earlier releases keep matching.
TEST(Checkpoint, IdentityNamesTheDecayAndThePrecisionInLowercase) {
  auto value = [](const plan::Plan &p, const std::string &name) {
    for (const IdentityField &f : planIdentity(p))
      if (f.name == name)
        return f.value;
    return std::string("(none)");
  };
  TinyModelOptions bf16;
  bf16.weightCopies = true;
  plan::Plan p = test::tinyModelPlan(bf16);
  EXPECT_EQ(value(p, "train.precision"), "bf16");
  p.mutable_train()->set_decay(plan::TrainConfig::CONSTANT);
  EXPECT_EQ(value(p, "train.decay"), "constant");
}

TEST(Checkpoint, ResumeRestoresTransposedAndTiedTensorsExactly) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(trainer->trainStep().ok());
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir =
      trainer->saveCheckpoint(freshDir("ckpt-restore"));
  ASSERT_TRUE(dir.ok());
  auto other = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(other->resume(*dir).ok());
  EXPECT_EQ(test::trainedState(*other), test::trainedState(*trainer));
}

TEST(Checkpoint, SavesAtomicallyAndFindsTheLatest) {
  auto trainer = tinyTrainer();
  std::string root = freshDir("ckpt-latest");
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(trainer->trainStep().ok());
    ASSERT_TRUE(trainer->saveCheckpoint(root).ok());
  }
  // Saving step 2 again replaces it in place.
  ASSERT_TRUE(trainer->saveCheckpoint(root).ok());
  std::vector<std::string> entries;
  for (const auto &e : fs::directory_iterator(root))
    entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"step-000001", "step-000002"}));

  // Step 10 sorts below step 2 as text; the number decides. A directory
  // without model.safetensors (an interrupted copy) is ignored.
  fs::copy(root + "/step-000001", root + "/step-000010");
  fs::create_directory(root + "/step-000099");
  EXPECT_EQ(*findCheckpointDir(root), root + "/step-000010");
  EXPECT_EQ(*findCheckpointDir(root + "/step-000001"), root + "/step-000001");
  EXPECT_EQ(findCheckpointDir(freshDir("ckpt-empty")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_MESSAGE(findCheckpointDir("/nonexistent/ckpt").status(),
                 "the checkpoint directory '/nonexistent/ckpt' does not "
                 "exist");
  std::string file = root + "/step-000001/model.safetensors";
  EXPECT_MESSAGE(findCheckpointDir(file).status(),
                 "'" + file + "' is not a directory; --resume takes a "
                 "step-NNNNNN checkpoint directory or the directory holding "
                 "them");
  EXPECT_MESSAGE(trainer->saveCheckpoint("/proc/forbidden").status(),
                 "cannot create the checkpoint directory '/proc/forbidden'");
}

void rewrite(
    const std::string &path,
    const std::function<void(std::vector<SafetensorsTensor> &,
                             std::map<std::string, std::string> &)> &edit);

TEST(Checkpoint, RefusesCheckpointsOfAnotherModel) {
  std::string dir = savedCheckpoint("ckpt-mismatch", tiedAndTransposed());
  TinyModelOptions narrower = tiedAndTransposed();
  narrower.hidden = 8;
  // Another model is told by its settings first, every one that differs.
  EXPECT_MESSAGE(readAgainst(dir, narrower),
                 "does not belong to this plan: model.hidden_size is \"16\" "
                 "in the checkpoint but \"8\" in the plan; "
                 "model.num_parameters is \"8208\" in the checkpoint but "
                 "\"4104\" in the plan. Resume with the plan it was saved "
                 "from");
  // With the same settings, a tensor of another shape is named.
  std::string reshaped = savedCheckpoint("ckpt-reshaped", {});
  rewrite(reshaped + "/model.safetensors", [](auto &tensors, auto &) {
    for (SafetensorsTensor &t : tensors)
      if (t.name == "model.norm.weight")
        t.shape = {4, 4};
  });
  EXPECT_MESSAGE(readAgainst(reshaped, {}),
                 "stores tensor \"model.norm.weight\" with shape [4, 4] but "
                 "the plan needs [16]");
  TinyModelOptions untransposed = tiedAndTransposed();
  untransposed.transposedHead = false;
  EXPECT_MESSAGE(readAgainst(dir, untransposed),
                 "stores tensor \"lm_head.weight\" with shape [16, 256] but "
                 "the plan needs [256, 16]");
  EXPECT_MESSAGE(readAgainst(dir, {}),
                 "holds tensor \"tied.embedding\", which the plan does not "
                 "have: it was saved from a different model");
  std::string plain = savedCheckpoint("ckpt-plain", {});
  EXPECT_MESSAGE(readAgainst(plain, tiedAndTransposed()),
                 "lacks tensor \"tied.embedding\", which the plan has");
  EXPECT_TRUE(readAgainst(dir, tiedAndTransposed()).ok());
}

// Writes the manifest of `dir` anew for the files as they are now, so that
// a test can reach the checks behind the integrity check.
void reseal(const std::string &dir) {
  ckpt::Manifest m;
  m.formatVersion = kCheckpointFormatVersion;
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename() != ckpt::kManifestFile)
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string &file : files) {
    absl::StatusOr<ckpt::FileDigest> d = ckpt::digestFile(file);
    ASSERT_TRUE(d.ok()) << d.status();
    m.files.push_back(*d);
  }
  absl::StatusOr<SafetensorsFile> opt =
      SafetensorsFile::read(dir + "/" + ckpt::kOptimizerFile);
  ASSERT_TRUE(opt.ok());
  auto step = opt->metadata().find("step");
  if (step != opt->metadata().end())
    m.step = std::stoll(step->second);
  ASSERT_TRUE(writeFileAtomically(dir + "/manifest.json",
                                  ckpt::formatManifest(m))
                  .ok());
}

// Rewrites one file of a checkpoint through `edit`.
void rewrite(
    const std::string &path,
    const std::function<void(std::vector<SafetensorsTensor> &,
                             std::map<std::string, std::string> &)> &edit) {
  // The reader maps the file, so its bytes are copied out before the file
  // is truncated and rewritten.
  absl::StatusOr<SafetensorsFile> f =
      SafetensorsFile::parse(*readWholeFile(path, "test"), path);
  ASSERT_TRUE(f.ok());
  std::vector<SafetensorsTensor> tensors = f->tensors();
  std::map<std::string, std::string> metadata = f->metadata();
  edit(tensors, metadata);
  ASSERT_TRUE(writeSafetensors(path, tensors, metadata).ok());
  reseal(fs::path(path).parent_path().string());
}

TEST(Checkpoint, RefusesBadDtypesAndMetadata) {
  std::string dir = savedCheckpoint("ckpt-dtype", {});
  rewrite(dir + "/model.safetensors", [](auto &tensors, auto &) {
    for (SafetensorsTensor &t : tensors)
      if (t.name == "model.norm.weight") {
        t.dtype = "F16";
        t.shape = {32};
      }
  });
  EXPECT_MESSAGE(readAgainst(dir, {}),
                 "stores tensor \"model.norm.weight\" as F16 but the plan "
                 "needs F32");

  auto metadataCase = [](const char *name, const char *key, const char *value,
                         const char *fragment) {
    std::string d = savedCheckpoint(name, {});
    rewrite(d + "/optimizer.safetensors", [&](auto &, auto &metadata) {
      if (value == nullptr)
        metadata.erase(key);
      else
        metadata[key] = value;
    });
    EXPECT_MESSAGE(readAgainst(d, {}), fragment);
  };
  metadataCase("ckpt-meta-1", "format_version", "4",
               "has format version 4 but this runtime reads versions 2 to 3: "
               "it was saved by a newer braid-run");
  // The metadata and the manifest were written by the same save.
  metadataCase("ckpt-meta-10", "format_version", "2",
               "is of format version 2 by its metadata but of version 3 by "
               "its manifest");
  metadataCase("ckpt-meta-2", "step", nullptr,
               "has no valid \"step\" in its metadata");
  metadataCase("ckpt-meta-3", "data_cursor", "-5",
               "has no valid \"data_cursor\"");
  metadataCase("ckpt-meta-4", "shuffle", "yes",
               "has no valid \"shuffle\" in its metadata (true or false)");
  metadataCase("ckpt-meta-5", "plan.train.lr", "0.5",
               "has a \"fingerprint\" that does not match the plan settings "
               "in its metadata");
  metadataCase("ckpt-meta-6", "total_steps", "0", "has total_steps 0");
  metadataCase("ckpt-meta-7", "skipped_steps", "2",
               "has step 1, total_steps 6 and skipped_steps 2 in its "
               "metadata: they contradict each other");
  // Step and data position must agree: 1 step of 2 x 2 samples ends at 4.
  metadataCase("ckpt-meta-8", "data_cursor", "9223372036854775800",
               "has data position 9223372036854775800 after 1 steps, but 1 "
               "steps of 4 samples end at 4: the data position is corrupt");
  metadataCase("ckpt-meta-9", "step", "2",
               "is of step 2 by its metadata but its directory is named for "
               "step 1");

  std::string missing = savedCheckpoint("ckpt-missing", {});
  fs::remove(missing + "/optimizer.safetensors");
  absl::Status s = readAgainst(missing, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_MESSAGE(s, "optimizer.safetensors");
}

// A flipped, missing or added byte anywhere in a checkpoint is refused with
// the file's name, before anything is read from it.
TEST(Checkpoint, RefusesDamagedFiles) {
  for (const char *file :
       {ckpt::kConfigFile, ckpt::kModelFile, ckpt::kOptimizerFile}) {
    std::string dir = savedCheckpoint(std::string("ckpt-flip-") + file, {});
    const std::string path = dir + "/" + file;
    std::string bytes = *readWholeFile(path, "test");
    for (size_t at : {size_t{3}, size_t{100}, bytes.size() - 1}) {
      std::string flipped = bytes;
      flipped[at] ^= 0x10;
      ASSERT_TRUE(writeFileAtomically(path, flipped).ok());
      absl::Status s = readAgainst(dir, {});
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_MESSAGE(s, "the checkpoint file '" + path +
                            "' is corrupt: its CRC-32C is ");
    }
    ASSERT_TRUE(writeFileAtomically(path, bytes.substr(0, bytes.size() - 4)).ok());
    EXPECT_MESSAGE(readAgainst(dir, {}),
                   "bytes but its manifest records " +
                       std::to_string(bytes.size()));
    ASSERT_TRUE(writeFileAtomically(path, bytes).ok());
    EXPECT_TRUE(readAgainst(dir, {}).ok());
  }
  std::string dir = savedCheckpoint("ckpt-manifest", {});
  std::string manifest = *readWholeFile(dir + "/manifest.json", "test");
  manifest[manifest.find("crc32c\": \"") + 10] ^= 0x01;
  ASSERT_TRUE(writeFileAtomically(dir + "/manifest.json", manifest).ok());
  EXPECT_FALSE(readAgainst(dir, {}).ok());
  fs::remove(dir + "/manifest.json");
  EXPECT_MESSAGE(readAgainst(dir, {}),
                 "has no manifest.json: it is incomplete");
  // Without its manifest, a directory is not a checkpoint to resume from.
  EXPECT_EQ(findCheckpointDir(fs::path(dir).parent_path().string())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// No checkpoint holds a NaN or an infinity: the writer refuses one, and the
// reader names one it finds.
TEST(Checkpoint, HoldsOnlyFiniteValues) {
  auto trainer = tinyTrainer();
  ASSERT_TRUE(trainer->trainStep().ok());
  std::string root = freshDir("ckpt-nonfinite");
  absl::StatusOr<std::string> good = trainer->saveCheckpoint(root);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(trainer->trainStep().ok());
  (*trainer->f32Tensor("model.norm.weight"))[5] = NAN;
  absl::Status s = trainer->saveCheckpoint(root).status();
  EXPECT_MESSAGE(s, "refusing to save the checkpoint of step 2: tensor "
                    "\"model.norm.weight\" holds a non-finite value at index "
                    "5; earlier checkpoints are kept");
  EXPECT_EQ(*findCheckpointDir(root), *good);
  EXPECT_TRUE(readAgainst(*good, {}).ok());

  rewrite(*good + "/optimizer.safetensors", [](auto &tensors, auto &) {
    for (SafetensorsTensor &t : tensors)
      if (t.name == "lm_head.weight.exp_avg_sq") {
        static std::string bytes;
        bytes = std::string(t.data);
        const float inf = INFINITY;
        std::memcpy(bytes.data() + 4 * 7, &inf, 4);
        t.data = bytes;
      }
  });
  EXPECT_MESSAGE(readAgainst(*good, {}),
                 "stores tensor \"lm_head.weight.exp_avg_sq\" with a "
                 "non-finite value at index 7");
}

// What a process that died while saving leaves is tidied: unfinished
// directories go, a checkpoint moved aside to be replaced comes back.
TEST(Checkpoint, RecoversFromADeadSaver) {
  std::string root = freshDir("ckpt-recover");
  auto trainer = tinyTrainer();
  ASSERT_TRUE(trainer->trainStep().ok());
  ASSERT_TRUE(trainer->saveCheckpoint(root).ok());
  // A pid that cannot be running: above the kernel's pid_max.
  const std::string dead = "4194999";
  fs::rename(root + "/step-000001", root + "/.step-000001.old-" + dead);
  fs::create_directory(root + "/.step-000002.tmp-" + dead);
  fs::create_directory(root + "/.step-000003.tmp-" + std::to_string(::getpid()));
  std::vector<std::string> notes = recoverCheckpointDir(root);
  ASSERT_EQ(notes.size(), 2u);
  std::vector<std::string> entries;
  for (const auto &e : fs::directory_iterator(root))
    entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{
                         ".step-000003.tmp-" + std::to_string(::getpid()),
                         "step-000001"}));
  EXPECT_TRUE(readAgainst(root + "/step-000001", {}).ok());
}

} // namespace
} // namespace braid
