// Loading whole specs: the shipped ones, defaults, files, and several
// errors at once.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <google/protobuf/text_format.h>

#include "compiler/spec/SpecSizes.h"
#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

namespace fs = std::filesystem;

spec::ModelSpec mustLoad(const std::string &relative) {
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(sourcePath(relative));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : spec::ModelSpec();
}

int64_t parameters(const spec::ModelSpec &spec) {
  absl::StatusOr<int64_t> count = parameterCount(spec.model());
  EXPECT_TRUE(count.ok()) << count.status();
  return count.ok() ? *count : -1;
}

// A scratch directory of this test, removed at the end.
class ScratchDir {
public:
  ScratchDir() {
    path_ = fs::temp_directory_path() /
            ("braid-spec-test-" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  std::string file(const std::string &name, const std::string &content) {
    std::string path = (path_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string path() const { return path_.string(); }

private:
  fs::path path_;
};

TEST(LoadSpec, EveryShippedSpecLoads) {
  int loaded = 0;
  for (const char *dir : {"models", "test/bench/specs"}) {
    for (const auto &entry : fs::directory_iterator(sourcePath(dir))) {
      if (entry.path().extension() != ".pbtxt")
        continue;
      absl::StatusOr<spec::ModelSpec> spec =
          loadSpecFile(entry.path().string());
      EXPECT_TRUE(spec.ok()) << spec.status();
      ++loaded;
    }
  }
  // llama-tiny, llama-tiny-bf16, gpt2-tiny, llama3-8b, gpt3-175b,
  // cpu-small, cpu-medium.
  EXPECT_GE(loaded, 7);
}

TEST(LoadSpec, TinySpecs) {
  spec::ModelSpec llama = mustLoad("models/llama-tiny.pbtxt");
  EXPECT_EQ(llama.name(), "llama-tiny");
  EXPECT_EQ(llama.model().num_kv_heads(), 2);
  EXPECT_EQ(llama.train().global_batch_size(), 16);
  EXPECT_EQ(parameters(llama), 123712);
  EXPECT_EQ(llama.train().precision(), spec::FP32);
  spec::ModelSpec bf16 = mustLoad("models/llama-tiny-bf16.pbtxt");
  EXPECT_EQ(bf16.name(), "llama-tiny-bf16");
  EXPECT_EQ(bf16.train().precision(), spec::BF16);
  EXPECT_EQ(parameters(bf16), 123712);
  spec::ModelSpec gpt2 = mustLoad("models/gpt2-tiny.pbtxt");
  EXPECT_EQ(gpt2.model().num_kv_heads(), 4);
  EXPECT_FLOAT_EQ(gpt2.train().hidden_dropout(), 0.1f);
  EXPECT_EQ(parameters(gpt2), 124672);
  // MoE layers: every expert, the router and the shared experts (the
  // plans' num_parameters, which count the step function's parameters).
  // mixtral-tiny: 2 layers of attention 12288, norms 128, router 256 and
  // 4 experts of 3 x 64 x 96; embeddings, head and final norm 32832.
  EXPECT_EQ(parameters(mustLoad("models/mixtral-tiny.pbtxt")), 205632);
  // deepseek-tiny: one dense layer (36992), two MoE layers of attention,
  // norms, router 512, 8 experts of 3 x 64 x 32 and a shared one (68224).
  EXPECT_EQ(parameters(mustLoad("models/deepseek-tiny.pbtxt")), 206272);
}

TEST(LoadSpec, Llama3_8B) {
  spec::ModelSpec spec = mustLoad("models/llama3-8b.pbtxt");
  const spec::Architecture &m = spec.model();
  EXPECT_EQ(m.vocab_size(), 128256);
  EXPECT_EQ(m.hidden_size(), 4096);
  EXPECT_EQ(m.num_layers(), 32);
  EXPECT_EQ(m.num_heads(), 32);
  EXPECT_EQ(m.num_kv_heads(), 8);
  EXPECT_EQ(m.ffn_hidden_size(), 14336);
  EXPECT_FLOAT_EQ(m.rope_theta(), 500000.0f);
  EXPECT_FLOAT_EQ(m.norm_eps(), 1e-5f);
  EXPECT_FALSE(m.tie_embeddings());
  EXPECT_EQ(spec.train().seq_len(), 8192);
  EXPECT_EQ(spec.train().micro_batch_size(), 1);
  // The published count of meta-llama/Meta-Llama-3-8B.
  EXPECT_EQ(parameters(spec), 8030261248);
}

TEST(LoadSpec, Gpt3_175B) {
  spec::ModelSpec spec = mustLoad("models/gpt3-175b.pbtxt");
  const spec::Architecture &m = spec.model();
  EXPECT_EQ(m.vocab_size(), 50257);
  EXPECT_EQ(m.hidden_size(), 12288);
  EXPECT_EQ(m.num_layers(), 96);
  EXPECT_EQ(m.num_heads(), 96);
  EXPECT_EQ(m.num_kv_heads(), 96);
  EXPECT_EQ(m.ffn_hidden_size(), 49152);
  EXPECT_EQ(m.max_position_embeddings(), 2048);
  EXPECT_TRUE(m.tie_embeddings());
  EXPECT_TRUE(m.linear_bias());
  EXPECT_EQ(spec.train().seq_len(), 2048);
  EXPECT_EQ(spec.train().micro_batch_size(), 1);
  // "175B" in the paper: 174.6 billion counted exactly.
  EXPECT_EQ(parameters(spec), 174604259328);
}

TEST(LoadSpec, BenchSpecs) {
  spec::ModelSpec small = mustLoad("test/bench/specs/cpu-small.pbtxt");
  EXPECT_EQ(small.model().vocab_size(), 2048);
  EXPECT_EQ(small.model().num_kv_heads(), 4);
  EXPECT_EQ(small.train().micro_batch_size(), 8);
  EXPECT_EQ(small.train().global_batch_size(), 8);
  EXPECT_EQ(small.train().seq_len(), 128);
  EXPECT_EQ(parameters(small), 3950848);
  spec::ModelSpec medium = mustLoad("test/bench/specs/cpu-medium.pbtxt");
  EXPECT_EQ(medium.model().hidden_size(), 512);
  EXPECT_EQ(medium.train().micro_batch_size(), 4);
  EXPECT_EQ(medium.train().global_batch_size(), 4);
  EXPECT_EQ(medium.train().seq_len(), 256);
  EXPECT_EQ(parameters(medium), 33694208);
  for (const spec::ModelSpec *s : {&small, &medium}) {
    EXPECT_EQ(s->train().hidden_dropout(), 0.0f);
    EXPECT_EQ(s->train().attention_dropout(), 0.0f);
  }
}

TEST(LoadSpec, Gpt2SmallParameterCountMatchesHuggingFace) {
  std::string text = edit(kGpt2, "vocab_size: 256", "vocab_size: 50257");
  text = edit(text, "hidden_size: 64", "hidden_size: 768");
  text = edit(text, "num_layers: 2", "num_layers: 12");
  text = edit(text, "num_heads: 4", "num_heads: 12");
  text = edit(text, "ffn_hidden_size: 256", "ffn_hidden_size: 3072");
  text = edit(text, "max_position_embeddings: 32",
              "max_position_embeddings: 1024");
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "gpt2.pbtxt");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(parameters(*spec), 124439808);
}

TEST(LoadSpec, ParameterCountRefusesUnvalidatedSizes) {
  spec::Architecture model;
  EXPECT_EQ(parameterCount(model).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoadSpec, DefaultsAreFilledExplicitly) {
  std::string text = edit(kGpt2, "name: \"g\"\n", "");
  absl::StatusOr<spec::ModelSpec> spec =
      loadSpecText(text, "dir/my-spec.pbtxt");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "my-spec");
  const spec::Architecture &m = spec->model();
  EXPECT_EQ(m.num_kv_heads(), 4);
  EXPECT_FLOAT_EQ(m.norm_eps(), 1e-5f);
  EXPECT_EQ(m.rope_theta(), 0.0f) << "LEARNED positions take no theta";
  ASSERT_TRUE(m.has_init());
  EXPECT_FLOAT_EQ(m.init().std(), 0.02f);
  EXPECT_FALSE(m.init().scaled_residual());
  ASSERT_TRUE(spec->has_parallel());
  EXPECT_EQ(spec->parallel().tensor_parallel(), 1);
  EXPECT_EQ(spec->parallel().pipeline_parallel(), 1);
  EXPECT_EQ(spec->parallel().data_parallel(), 1);
  const spec::Training &t = spec->train();
  EXPECT_EQ(t.seed(), 0u);
  EXPECT_EQ(t.global_batch_size(), t.micro_batch_size());
  EXPECT_FLOAT_EQ(t.adamw().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(t.adamw().beta2(), 0.95f);
  EXPECT_FLOAT_EQ(t.adamw().eps(), 1e-8f);
  EXPECT_EQ(t.adamw().weight_decay(), 0.0f);
  EXPECT_EQ(t.grad_clip(), 0.0f);
  ASSERT_TRUE(t.has_lr_schedule());
  EXPECT_EQ(t.lr_schedule().decay(), spec::COSINE);
  EXPECT_EQ(t.lr_schedule().warmup_steps(), 0);
  EXPECT_EQ(t.lr_schedule().min_lr(), 0.0f);
  EXPECT_EQ(t.hidden_dropout(), 0.0f);
  EXPECT_EQ(t.attention_dropout(), 0.0f);
  EXPECT_EQ(t.precision(), spec::FP32);
}

TEST(LoadSpec, PrecisionDefaultsToFp32) {
  auto precisionOf = [](const std::string &text) {
    absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "t.pbtxt");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? spec->train().precision()
                     : spec::PRECISION_UNSPECIFIED;
  };
  EXPECT_EQ(precisionOf(std::string(kLlama)), spec::FP32);
  EXPECT_EQ(precisionOf(edit(kLlama, "steps: 10",
                             "steps: 10 precision: PRECISION_UNSPECIFIED")),
            spec::FP32);
  EXPECT_EQ(precisionOf(edit(kLlama, "steps: 10", "steps: 10 precision: 0")),
            spec::FP32);
  EXPECT_EQ(precisionOf(edit(kLlama, "steps: 10", "steps: 10 precision: BF16")),
            spec::BF16);
}

TEST(LoadSpec, RopeThetaDefaultsForRope) {
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(kLlama, "t.pbtxt");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FLOAT_EQ(spec->model().rope_theta(), 10000.0f);
  EXPECT_EQ(spec->model().max_position_embeddings(), 0);
}

TEST(LoadSpec, ZeroMeansDefault) {
  std::string text =
      edit(kLlama, "adamw { lr: 1e-3 }", "adamw { lr: 1e-3 beta1: 0 eps: 0 }");
  text = edit(text, "num_kv_heads: 2", "num_kv_heads: 0");
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "t.pbtxt");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FLOAT_EQ(spec->train().adamw().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(spec->train().adamw().eps(), 1e-8f);
  EXPECT_EQ(spec->model().num_kv_heads(), 4);
}

TEST(LoadSpec, DefaultNameFromDisplayName) {
  std::string text = edit(kLlama, "name: \"t\"\n", "");
  EXPECT_EQ(loadSpecText(text, "a/b/.x y.pbtxt")->name(), "xy");
  EXPECT_EQ(loadSpecText(text, "<stdin>")->name(), "stdin");
  EXPECT_EQ(loadSpecText(text, "")->name(), "model");
}

TEST(LoadSpec, LoadedSpecReloadsUnchanged) {
  spec::ModelSpec first = mustLoad("models/gpt2-tiny.pbtxt");
  std::string printed;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(first, &printed));
  absl::StatusOr<spec::ModelSpec> second =
      loadSpecText(printed, "printed.pbtxt");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->SerializeAsString(), first.SerializeAsString());
}

TEST(LoadSpec, EmptyText) {
  EXPECT_EQ(errorOf(""),
            "t.pbtxt:1:1: model: missing; add a model { ... } block with the "
            "architecture (vocab_size, hidden_size, num_layers, num_heads, "
            "ffn_hidden_size, norm, activation, position_embedding, naming)\n"
            "t.pbtxt:1:1: train: missing; add a train { ... } block with at "
            "least micro_batch_size, seq_len, steps and adamw { lr }");
}

TEST(LoadSpec, AllValidationErrorsTogether) {
  std::string path = sourcePath("test/unit/spec/bad/many-errors.pbtxt");
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(path);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            path +
                ":2:1: name: \"many errors\" contains ' '; use only letters, "
                "digits, '.', '_' and '-', since the name becomes part of file "
                "names\n" +
                path +
                ":6:3: model.num_layers: 0 is not positive; set the number "
                "of transformer layers, e.g. num_layers: 32\n" +
                path +
                ":7:3: model.num_heads: 6 does not divide hidden_size 64; "
                "choose a divisor of 64 such as 4 or 8\n" +
                path +
                ":10:3: model.activation: naming HF_LLAMA needs SWIGLU, "
                "got GELU: Llama's MLP is gate_proj, up_proj and down_proj "
                "(SwiGLU); set activation: SWIGLU or choose another "
                "naming\n" +
                path +
                ":14:1: train.steps: missing; set the optimizer steps of "
                "the run, e.g. steps: 1000\n" +
                path +
                ":16:3: train.global_batch_size: 10 is not a multiple of "
                "micro_batch_size 4; each step accumulates "
                "global_batch_size / micro_batch_size whole micro-batches, "
                "so use 8 or 12\n" +
                path +
                ":18:20: train.adamw.beta2: 1.5 is outside [0, 1); beta2 "
                "is a decay rate, typically 0.95 or 0.999; remove the line "
                "for the default 0.95\n" +
                path +
                ":19:3: train.hidden_dropout: 1 is outside [0, 1); it is "
                "the probability of zeroing an activation; set 0 for no "
                "dropout or a value such as 0.1");
}

TEST(LoadSpec, SyntaxErrorsAloneAndTogether) {
  std::string path = sourcePath("test/unit/spec/bad/unknown-fields.pbtxt");
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(path);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            path +
                ":4:3: model.vocab_sise: no field named vocab_sise in "
                "model; did you mean vocab_size?\n" +
                path +
                ":5:3: model.seq_len: no field named seq_len in "
                "model; seq_len belongs in train, not in model\n" +
                path +
                ":8:20: train.adamw.beta_1: no field named beta_1 in "
                "train.adamw; did you mean beta1?");
}

TEST(LoadSpec, MissingFile) {
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile("no/such/spec.pbtxt");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec.status().message(),
            "no/such/spec.pbtxt: cannot read the spec file: no such file or "
            "directory; check the path and the working directory");
}

TEST(LoadSpec, DirectoryInsteadOfFile) {
  ScratchDir dir;
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(dir.path());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            dir.path() +
                ": is a directory, not a spec file; name a .pbtxt file");
}

TEST(LoadSpec, UnreadableFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root reads files whatever their permissions";
  ScratchDir dir;
  std::string path = dir.file("locked.pbtxt", std::string(kLlama));
  fs::permissions(path, fs::perms::none);
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(spec.status().message(),
            path + ": cannot read the spec file: permission denied; check the "
                   "file's permissions");
}

TEST(LoadSpec, FileTooLarge) {
  ScratchDir dir;
  std::string path =
      dir.file("huge.pbtxt", std::string(kMaxSpecBytes + 10, '#'));
  absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            path + ": the spec is over 1048576 bytes, but specs are limited "
                   "to 1048576 bytes (a real one is a few kilobytes); is this "
                   "the right file?");
}

TEST(LoadSpec, FileAtSizeLimitIsRead) {
  ScratchDir dir;
  std::string text(kLlama);
  text += std::string(kMaxSpecBytes - text.size(), ' ');
  absl::StatusOr<spec::ModelSpec> spec =
      loadSpecFile(dir.file("padded.pbtxt", text));
  EXPECT_TRUE(spec.ok()) << spec.status();
}

TEST(LoadSpec, TextTooLarge) {
  std::string text(kMaxSpecBytes + 1, ' ');
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "big.pbtxt");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "big.pbtxt: the spec is 1048577 bytes, but specs are limited to "
            "1048576 bytes (a real one is a few kilobytes); is this the "
            "right file?");
}

} // namespace
} // namespace braid::test
