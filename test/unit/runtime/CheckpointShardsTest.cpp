// What makes a checkpoint loadable by transformers: config.json, and the
// parameters sharded as save_pretrained shards them, with the index; and
// the reader's refusals of a sharded checkpoint whose files disagree.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/HfConfig.h"
#include "runtime/ckpt/Safetensors.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/WholeFile.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using test::freshDir;
using test::TinyModelOptions;
using test::tinyTrainer;

#define EXPECT_MESSAGE(status, fragment)                                       \
  do {                                                                         \
    absl::Status s_ = (status);                                                \
    ASSERT_FALSE(s_.ok()) << "expected: " << fragment;                         \
    EXPECT_NE(std::string(s_.message()).find(fragment), std::string::npos)     \
        << "message: " << s_.message();                                        \
  } while (false)

TEST(ShardIndex, SplitsAsHuggingfaceHubDoes) {
  using Shards = std::vector<std::vector<size_t>>;
  EXPECT_EQ(ckpt::splitIntoShards({10, 20, 30}, 100), (Shards{{0, 1, 2}}));
  // A shard closes before the tensor that would take it past the limit; an
  // exact fit stays.
  EXPECT_EQ(ckpt::splitIntoShards({40, 60, 1, 99}, 100),
            (Shards{{0, 1}, {2, 3}}));
  // A tensor beyond the limit is a shard of its own at once, and the
  // current shard goes on after it.
  EXPECT_EQ(ckpt::splitIntoShards({10, 500, 20, 90}, 100),
            (Shards{{1}, {0, 2}, {3}}));
  EXPECT_EQ(ckpt::splitIntoShards({}, 100), Shards{});
  EXPECT_EQ(ckpt::splitIntoShards({1, 1}, UINT64_MAX), (Shards{{0, 1}}));
  EXPECT_EQ(ckpt::shardFileName(2, 5), "model-00002-of-00005.safetensors");
}

TEST(ShardIndex, WritesAndReadsTransformersIndexText) {
  ckpt::ShardIndex index;
  index.totalSize = 96;
  index.weightMap = {{"model.norm.weight", "model-00002-of-00002.safetensors"},
                     {"lm_head.weight", "model-00001-of-00002.safetensors"}};
  const std::string text = ckpt::formatShardIndex(index);
  // json.dumps(index, indent=2, sort_keys=True) + "\n".
  EXPECT_EQ(text,
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 96\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"lm_head.weight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"model.norm.weight\": "
            "\"model-00002-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
  absl::StatusOr<ckpt::ShardIndex> back = ckpt::parseShardIndex(text, "i");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->totalSize, 96u);
  ASSERT_EQ(back->weightMap.size(), 2u);
  EXPECT_EQ(back->weightMap[0].first, "lm_head.weight");

  auto refusal = [](const std::string &bad) {
    absl::StatusOr<ckpt::ShardIndex> r = ckpt::parseShardIndex(bad, "x.json");
    EXPECT_FALSE(r.ok()) << bad;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_EQ(refusal("[]"),
            "the checkpoint index 'x.json' is malformed: it is not a JSON "
            "object");
  EXPECT_NE(refusal("{\"weight_map\": {}").find("invalid JSON at byte 17"),
            std::string::npos);
  EXPECT_NE(refusal("{\"weight_map\": {}}")
                .find("it has no \"metadata\": {\"total_size\": BYTES}"),
            std::string::npos);
  EXPECT_NE(refusal("{\"metadata\": {\"total_size\": -1}, \"weight_map\": {}}")
                .find("no \"metadata\""),
            std::string::npos);
  EXPECT_NE(refusal("{\"metadata\": {\"total_size\": 1}}")
                .find("it has no \"weight_map\" object"),
            std::string::npos);
  EXPECT_NE(refusal("{\"metadata\": {\"total_size\": 1}, \"weight_map\": "
                    "{\"a\": 3}}")
                .find("\"weight_map\" gives tensor \"a\" something other "
                      "than a file name"),
            std::string::npos);
  // A tensor named twice is a JSON error: keys are unique.
  EXPECT_NE(refusal("{\"metadata\": {\"total_size\": 1}, \"weight_map\": "
                    "{\"a\": \"f\", \"a\": \"g\"}}")
                .find("a key not used before"),
            std::string::npos);
}

TEST(HfConfig, WritesFloatsAsPythonDoesTheF32TheKernelsUse) {
  EXPECT_EQ(ckpt::shortestF32(1e-5f), "1e-05");
  EXPECT_EQ(ckpt::shortestF32(1e-6f), "1e-06");
  EXPECT_EQ(ckpt::shortestF32(10000.0f), "10000.0");
  EXPECT_EQ(ckpt::shortestF32(500000.0f), "500000.0");
  EXPECT_EQ(ckpt::shortestF32(0.1f), "0.1");
  EXPECT_EQ(ckpt::shortestF32(0.0f), "0.0");
  EXPECT_EQ(ckpt::shortestF32(1.5f), "1.5");
  EXPECT_EQ(ckpt::shortestF32(0.0001f), "0.0001");
  EXPECT_EQ(ckpt::shortestF32(1e16f), "1e+16");
  // The f32 nearest 123456789 is 123456792; 123456790 reads back as it.
  EXPECT_EQ(ckpt::shortestF32(123456789.0f), "123456790.0");
  EXPECT_EQ(ckpt::shortestF32(3.0e-7f), "3e-07");
  // Every written value reads back, through a double, as the same f32.
  for (float v : {1e-5f, 3.3333333e-6f, 0.7f, 1.17549435e-38f, 3.4e38f}) {
    const std::string text = ckpt::shortestF32(v);
    EXPECT_EQ(static_cast<float>(std::strtod(text.c_str(), nullptr)), v)
        << text;
  }
}

TEST(HfConfig, DescribesTheModelOfThePlan) {
  plan::Plan p = test::tinyModelPlan();
  p.mutable_model()->set_ffn_hidden_size(40);
  const std::string llama = ckpt::huggingFaceConfig(p);
  EXPECT_EQ(llama, "{\n"
                   "  \"architectures\": [\n"
                   "    \"LlamaForCausalLM\"\n"
                   "  ],\n"
                   "  \"attention_bias\": false,\n"
                   "  \"attention_dropout\": 0.0,\n"
                   "  \"bos_token_id\": null,\n"
                   "  \"eos_token_id\": null,\n"
                   "  \"head_dim\": 16,\n"
                   "  \"hidden_act\": \"silu\",\n"
                   "  \"hidden_size\": 16,\n"
                   "  \"intermediate_size\": 40,\n"
                   "  \"max_position_embeddings\": 8,\n"
                   "  \"mlp_bias\": false,\n"
                   "  \"model_type\": \"llama\",\n"
                   "  \"num_attention_heads\": 1,\n"
                   "  \"num_hidden_layers\": 0,\n"
                   "  \"num_key_value_heads\": 1,\n"
                   "  \"pretraining_tp\": 1,\n"
                   "  \"rms_norm_eps\": 1e-05,\n"
                   "  \"rope_scaling\": null,\n"
                   "  \"rope_theta\": 10000.0,\n"
                   "  \"tie_word_embeddings\": false,\n"
                   "  \"torch_dtype\": \"float32\",\n"
                   "  \"use_cache\": true,\n"
                   "  \"vocab_size\": 256\n"
                   "}\n");
  plan::ModelInfo &m = *p.mutable_model();
  m.set_family("gpt2");
  m.set_activation(plan::ModelInfo::GELU_TANH);
  m.set_rope_theta(0);
  m.set_max_position_embeddings(128);
  m.set_tie_embeddings(true);
  m.set_linear_bias(true);
  m.set_hidden_dropout(static_cast<float>(0.1));
  m.set_attention_dropout(static_cast<float>(0.05));
  m.set_norm_eps(static_cast<float>(1e-6));
  const std::string gpt2 = ckpt::huggingFaceConfig(p);
  for (const char *line :
       {"\"activation_function\": \"gelu_new\"", "\"GPT2LMHeadModel\"",
        "\"attn_pdrop\": 0.05,", "\"embd_pdrop\": 0.1,",
        "\"resid_pdrop\": 0.1,", "\"layer_norm_epsilon\": 1e-06,",
        "\"model_type\": \"gpt2\"", "\"n_ctx\": 128,", "\"n_embd\": 16,",
        "\"n_head\": 1,", "\"n_inner\": 40,", "\"n_layer\": 0,",
        "\"n_positions\": 128,", "\"tie_word_embeddings\": true,",
        "\"torch_dtype\": \"float32\""})
    EXPECT_NE(gpt2.find(line), std::string::npos) << line << "\n" << gpt2;
  EXPECT_EQ(gpt2.find("rope"), std::string::npos);
}

TinyModelOptions tiedAndTransposed() {
  TinyModelOptions o;
  o.transposedHead = true;
  o.embeddingAlias = "tied.embedding";
  return o;
}

// The tiny model's tensors are 16384, 16384 (the alias), 64 and 16384
// bytes: a limit of 20000 bytes makes three shards.
CheckpointLayout threeShards() {
  CheckpointLayout layout;
  layout.maxShardBytes = 20000;
  return layout;
}

std::vector<std::string> filesIn(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> tensorNames(const std::string &path) {
  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::read(path);
  EXPECT_TRUE(f.ok()) << f.status();
  std::vector<std::string> names;
  if (f.ok())
    for (const SafetensorsTensor &t : f->tensors())
      names.push_back(t.name);
  return names;
}

TEST(CheckpointShards, SplitsTheParametersAsTransformersDoes) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir =
      trainer->saveCheckpoint(freshDir("shards-layout"), threeShards());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(filesIn(*dir),
            (std::vector<std::string>{"config.json", "manifest.json",
                                      "model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors",
                                      "model.safetensors.index.json",
                                      "optimizer.safetensors"}));
  EXPECT_EQ(tensorNames(*dir + "/model-00001-of-00003.safetensors"),
            std::vector<std::string>{"model.embed_tokens.weight"});
  EXPECT_EQ(tensorNames(*dir + "/model-00002-of-00003.safetensors"),
            (std::vector<std::string>{"tied.embedding", "model.norm.weight"}));
  EXPECT_EQ(tensorNames(*dir + "/model-00003-of-00003.safetensors"),
            std::vector<std::string>{"lm_head.weight"});
  EXPECT_EQ(SafetensorsFile::read(*dir + "/model-00002-of-00003.safetensors")
                ->metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}}));
  absl::StatusOr<std::string> index =
      readWholeFile(*dir + "/model.safetensors.index.json", "test");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(*index,
            "{\n  \"metadata\": {\n    \"total_size\": 49216\n  },\n"
            "  \"weight_map\": {\n"
            "    \"lm_head.weight\": \"model-00003-of-00003.safetensors\",\n"
            "    \"model.embed_tokens.weight\": "
            "\"model-00001-of-00003.safetensors\",\n"
            "    \"model.norm.weight\": \"model-00002-of-00003.safetensors\",\n"
            "    \"tied.embedding\": \"model-00002-of-00003.safetensors\"\n"
            "  }\n}\n");
  absl::StatusOr<std::string> manifest =
      readWholeFile(*dir + "/manifest.json", "test");
  absl::StatusOr<ckpt::Manifest> parsed =
      ckpt::parseManifest(*manifest, "manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<std::string> listed;
  for (const ckpt::FileDigest &f : parsed->files)
    listed.push_back(f.name);
  EXPECT_EQ(listed,
            (std::vector<std::string>{
                "config.json", "model-00001-of-00003.safetensors",
                "model-00002-of-00003.safetensors",
                "model-00003-of-00003.safetensors",
                "model.safetensors.index.json", "optimizer.safetensors"}));
  std::vector<std::string> paths = checkpointFilePaths(*dir);
  EXPECT_EQ(paths.size(), 7u);
  EXPECT_EQ(paths[0], *dir + "/manifest.json");

  // Parameters that fit in one shard are one model.safetensors, as ever.
  CheckpointLayout exact;
  exact.maxShardBytes = 49216;
  absl::StatusOr<std::string> single =
      trainer->saveCheckpoint(freshDir("shards-single"), exact);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(
      filesIn(*single),
      (std::vector<std::string>{"config.json", "manifest.json",
                                "model.safetensors", "optimizer.safetensors"}));
}

TEST(CheckpointShards, ResumesAsFromOneFile) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(trainer->trainStep().ok());
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> sharded =
      trainer->saveCheckpoint(freshDir("shards-resume"), threeShards());
  absl::StatusOr<std::string> single =
      trainer->saveCheckpoint(freshDir("shards-resume-single"));
  ASSERT_TRUE(sharded.ok() && single.ok());
  auto fromShards = tinyTrainer(tiedAndTransposed());
  auto fromSingle = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(fromShards->resume(*sharded).ok());
  ASSERT_TRUE(fromSingle->resume(*single).ok());
  EXPECT_EQ(test::trainedState(*fromShards), test::trainedState(*trainer));
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<StepResult> a = fromShards->trainStep();
    absl::StatusOr<StepResult> b = fromSingle->trainStep();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss);
  }
  EXPECT_EQ(test::trainedState(*fromShards), test::trainedState(*fromSingle));
}

// Writes the manifest of `dir` anew for every file in it, so that a test
// reaches the checks behind the integrity check.
void reseal(const std::string &dir) {
  ckpt::Manifest m;
  m.formatVersion = kCheckpointFormatVersion;
  m.step = 1;
  for (const std::string &name : filesIn(dir)) {
    if (name == ckpt::kManifestFile)
      continue;
    absl::StatusOr<ckpt::FileDigest> d = ckpt::digestFile(dir + "/" + name);
    ASSERT_TRUE(d.ok()) << d.status();
    m.files.push_back(*d);
  }
  ASSERT_TRUE(
      writeFileAtomically(dir + "/manifest.json", ckpt::formatManifest(m))
          .ok());
}

// A sharded checkpoint of one step, with `edit` applied to the text of its
// index and the manifest written anew.
std::string editedIndex(const std::string &name,
                        const std::function<void(std::string &)> &edit) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  EXPECT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir =
      trainer->saveCheckpoint(freshDir(name), threeShards());
  EXPECT_TRUE(dir.ok()) << dir.status();
  const std::string path = *dir + "/" + ckpt::kModelIndexFile;
  std::string text = *readWholeFile(path, "test");
  edit(text);
  EXPECT_TRUE(writeFileAtomically(path, text).ok());
  reseal(*dir);
  return *dir;
}

void replace(std::string &text, const std::string &from,
             const std::string &to) {
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
}

absl::Status readTied(const std::string &dir) {
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(test::tinyModelPlan(tiedAndTransposed()).SerializeAsString(),
               test::testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(plan.ok());
  return readCheckpoint(dir, *plan).status();
}

TEST(CheckpointShards, RefusesAnIndexThatDisagreesWithItsShards) {
  const std::string third = "model-00003-of-00003.safetensors";
  const std::string head = "\"lm_head.weight\": \"" + third + "\"";
  // An index naming a shard the checkpoint lacks.
  std::string dir = editedIndex("shards-missing-file", [&](std::string &t) {
    replace(t, head,
            "\"lm_head.weight\": \"model-00009-of-00009.safetensors\"");
  });
  fs::remove(dir + "/" + third);
  reseal(dir);
  EXPECT_MESSAGE(readTied(dir),
                 "the checkpoint index '" + dir +
                     "/model.safetensors.index.json' maps tensor "
                     "\"lm_head.weight\" to "
                     "'model-00009-of-00009.safetensors', which the "
                     "checkpoint does not have");
  // A shard on disk that the manifest does not vouch for.
  dir = editedIndex("shards-unlisted", [](std::string &) {});
  std::string manifest = *readWholeFile(dir + "/manifest.json", "test");
  size_t at = manifest.find("{\"name\": \"" + third);
  manifest.erase(at, manifest.find('}', at) + 5 - at); // and ",\n  "
  ASSERT_TRUE(writeFileAtomically(dir + "/manifest.json", manifest).ok());
  EXPECT_MESSAGE(readTied(dir), "which the checkpoint's manifest does not "
                                "list, so it cannot be verified");
  // A shard that disappeared after the save.
  dir = editedIndex("shards-deleted", [](std::string &) {});
  fs::remove(dir + "/" + third);
  absl::Status deleted = readTied(dir);
  EXPECT_EQ(deleted.code(), absl::StatusCode::kNotFound);
  EXPECT_MESSAGE(deleted, third);
  // A tensor of a shard the index does not name (the shard's other tensor
  // it does).
  const std::string second = "model-00002-of-00003.safetensors";
  dir = editedIndex("shards-unnamed", [&](std::string &t) {
    replace(t, ",\n    \"tied.embedding\": \"" + second + "\"", "");
  });
  EXPECT_MESSAGE(readTied(dir), "the checkpoint shard '" + dir + "/" + second +
                                    "' holds tensor \"tied.embedding\", "
                                    "which its index '" +
                                    dir +
                                    "/model.safetensors.index.json' does not "
                                    "name");
  // One mapped to another shard.
  dir = editedIndex("shards-moved", [&](std::string &t) {
    replace(t, "\"model.norm.weight\": \"" + second + "\"",
            "\"model.norm.weight\": \"model-00001-of-00003.safetensors\"");
  });
  EXPECT_MESSAGE(readTied(dir), "holds tensor \"model.norm.weight\", which "
                                "its index '" +
                                    dir +
                                    "/model.safetensors.index.json' maps to "
                                    "'model-00001-of-00003.safetensors'");
  // A shard the index maps no tensor to.
  dir = editedIndex("shards-orphan", [&](std::string &t) {
    replace(t, head,
            "\"lm_head.weight\": \"model-00001-of-00003.safetensors\"");
  });
  EXPECT_MESSAGE(readTied(dir),
                 "lists '" + third + "', which its index maps no tensor to");
  // A mapped tensor that no shard holds.
  dir = editedIndex("shards-phantom", [&](std::string &t) {
    replace(t, head,
            head + ",\n    \"extra.weight\": \"model-00001-of-00003."
                   "safetensors\"");
  });
  EXPECT_MESSAGE(readTied(dir), "maps tensor \"extra.weight\" to "
                                "'model-00001-of-00003.safetensors', which "
                                "does not hold it");
  // The sizes do not add up.
  dir = editedIndex("shards-total", [](std::string &t) {
    replace(t, "\"total_size\": 49216", "\"total_size\": 49215");
  });
  EXPECT_MESSAGE(readTied(dir), "gives total_size 49215 but its shards hold "
                                "49216 bytes of tensors");
  // A shard and its tensor gone from the index too: the plan's tensor is
  // missing, and the index is named.
  dir = editedIndex("shards-lacking", [&](std::string &t) {
    replace(t, "    " + head + ",\n", "");
    replace(t, "\"total_size\": 49216", "\"total_size\": 32832");
  });
  fs::remove(dir + "/" + third);
  reseal(dir);
  EXPECT_MESSAGE(readTied(dir), "the checkpoint '" + dir +
                                    "/model.safetensors.index.json' lacks "
                                    "tensor \"lm_head.weight\", which the "
                                    "plan has");
  // A tensor mapped to a file that is no shard.
  dir = editedIndex("shards-special", [&](std::string &t) {
    replace(t, head, "\"lm_head.weight\": \"optimizer.safetensors\"");
  });
  EXPECT_MESSAGE(readTied(dir), "to 'optimizer.safetensors', which is not a "
                                "model shard");
  // Not an index at all.
  dir = editedIndex("shards-malformed", [](std::string &t) { t = "{\"a\""; });
  EXPECT_MESSAGE(readTied(dir), "the checkpoint index '" + dir +
                                    "/model.safetensors.index.json' is "
                                    "malformed: invalid JSON at byte 4");
  dir = editedIndex("shards-no-map", [](std::string &t) {
    t = "{\"metadata\": {\"total_size\": 49216}}";
  });
  EXPECT_MESSAGE(readTied(dir), "it has no \"weight_map\" object");
}

TEST(CheckpointShards, RefusesStrayAndDuplicatedFiles) {
  // A tensor stored in two shards.
  std::string dir = editedIndex("shards-twice", [](std::string &) {});
  const std::string first = dir + "/model-00001-of-00003.safetensors";
  {
    absl::StatusOr<SafetensorsFile> one =
        SafetensorsFile::parse(*readWholeFile(first, "test"), first);
    absl::StatusOr<SafetensorsFile> three = SafetensorsFile::parse(
        *readWholeFile(dir + "/model-00003-of-00003.safetensors", "test"),
        "three");
    ASSERT_TRUE(one.ok() && three.ok());
    std::vector<SafetensorsTensor> tensors = one->tensors();
    tensors.push_back(three->tensors()[0]);
    ASSERT_TRUE(writeSafetensors(first, tensors, {{"format", "pt"}}).ok());
  }
  reseal(dir);
  EXPECT_MESSAGE(readTied(dir),
                 "the checkpoint stores tensor \"lm_head.weight\" twice, in '" +
                     first + "' and in '" + dir +
                     "/model-00003-of-00003.safetensors'");

  // Both layouts at once, or a file of neither.
  dir = editedIndex("shards-both", [](std::string &) {});
  fs::copy_file(dir + "/model-00001-of-00003.safetensors",
                dir + "/model.safetensors");
  reseal(dir);
  EXPECT_MESSAGE(readTied(dir), "lists both model.safetensors and "
                                "model.safetensors.index.json: the checkpoint "
                                "cannot be trusted");
  fs::remove(dir + "/model.safetensors");
  ASSERT_TRUE(writeFileAtomically(dir + "/notes.txt", "hello").ok());
  reseal(dir);
  EXPECT_MESSAGE(readTied(dir),
                 "lists 'notes.txt', which its index maps no tensor to");
  fs::remove(dir + "/notes.txt");
  reseal(dir);
  EXPECT_TRUE(readTied(dir).ok());

  // A manifest may name files of its own directory only, each once.
  std::string manifest = *readWholeFile(dir + "/manifest.json", "test");
  std::string escaping = manifest;
  replace(escaping, "\"config.json\"", "\"../config.json\"");
  ASSERT_TRUE(writeFileAtomically(dir + "/manifest.json", escaping).ok());
  EXPECT_MESSAGE(readTied(dir), "a \"files\" entry is called "
                                "\"../config.json\", not the name of a file in "
                                "the checkpoint directory");
  std::string twice = manifest;
  replace(twice, "\"optimizer.safetensors\"", "\"config.json\"");
  ASSERT_TRUE(writeFileAtomically(dir + "/manifest.json", twice).ok());
  EXPECT_MESSAGE(readTied(dir), "it lists \"config.json\" twice");
}

// A checkpoint of format 2 (no config.json, its metadata and manifest of
// version 2) still resumes.
TEST(CheckpointShards, ReadsFormatTwo) {
  auto trainer = tinyTrainer(tiedAndTransposed());
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> dir =
      trainer->saveCheckpoint(freshDir("format-2"));
  ASSERT_TRUE(dir.ok());
  fs::remove(*dir + "/config.json");
  const std::string opt = *dir + "/optimizer.safetensors";
  absl::StatusOr<SafetensorsFile> f =
      SafetensorsFile::parse(*readWholeFile(opt, "test"), opt);
  ASSERT_TRUE(f.ok());
  std::map<std::string, std::string> metadata = f->metadata();
  metadata["format_version"] = "2";
  ASSERT_TRUE(writeSafetensors(opt, f->tensors(), metadata).ok());
  reseal(*dir);
  std::string manifest = *readWholeFile(*dir + "/manifest.json", "test");
  replace(manifest, "\"format_version\": 3", "\"format_version\": 2");
  ASSERT_TRUE(writeFileAtomically(*dir + "/manifest.json", manifest).ok());
  auto other = tinyTrainer(tiedAndTransposed());
  absl::StatusOr<ResumeReport> resumed = other->resume(*dir);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(test::trainedState(*other), test::trainedState(*trainer));
}

} // namespace
} // namespace braid
