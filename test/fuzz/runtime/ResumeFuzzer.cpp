// A random checkpoint directory, resumed into a trainer of a valid plan.
// Resume must refuse or accept without crashing, and an accepted
// checkpoint must train a step on finite values only.
//
// An input is a little container of the directory's files:
//
//   byte 0          flags: bit 0, write manifest.json anew from the other
//                   files (so that mutations get past the checksums to the
//                   parsers and checks behind them); bit 1, name the
//                   directory step-NNNNNN with N = byte 1 and resume from
//                   the folder holding it (otherwise the directory itself
//                   is resumed); bit 2, a config.json; bit 3, the sharded
//                   layout
//   byte 1          the step of the directory name (bit 1)
//   then, per file  a 4-byte little-endian length and that many bytes:
//                   config.json (bit 2); model.safetensors, or with bit 3
//                   model.safetensors.index.json,
//                   model-00001-of-00002.safetensors and
//                   model-00002-of-00002.safetensors; optimizer.safetensors
//   the rest        manifest.json (unless bit 0)
//
// Lengths past the end are cut to what is there.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "kernels/registry/Kernel.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/train/Trainer.h"
#include "test/unit/runtime/TinyModelPlan.h"

namespace {

namespace fs = std::filesystem;
using namespace braid;

// One trainer for the whole run: resume refuses without changing it, and
// an accepted resume replaces its whole state.
Trainer &trainer() {
  static Trainer *t = [] {
    test::TinyModelOptions model;
    model.transposedHead = true;
    model.embeddingAlias = "tied.embedding";
    absl::StatusOr<LoadedPlan> plan =
        loadPlan(test::tinyModelPlan(model).SerializeAsString(),
                 defaultKernelRegistry(), Device::kCPU);
    std::string text;
    for (int i = 0; i < 4000; ++i)
      text.push_back(static_cast<char>('a' + (i * 7) % 26));
    absl::StatusOr<TokenData> data =
        TokenData::fromBytes(text, TokenFormat::kText, 256, "fuzz");
    TrainerOptions options;
    options.numThreads = 1;
    absl::StatusOr<std::unique_ptr<Trainer>> made =
        plan.ok() && data.ok()
            ? Trainer::create(std::move(*plan), std::move(*data), options)
            : absl::StatusOr<std::unique_ptr<Trainer>>(
                  absl::InternalError("no plan"));
    if (!made.ok())
      std::abort();
    return made->release();
  }();
  return *t;
}

std::string_view take(std::string_view &in) {
  uint32_t n = 0;
  for (int i = 0; i < 4 && !in.empty(); ++i) {
    n |= uint32_t{static_cast<unsigned char>(in[0])} << (8 * i);
    in.remove_prefix(1);
  }
  std::string_view part = in.substr(0, n);
  in.remove_prefix(part.size());
  return part;
}

void write(const fs::path &path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in(reinterpret_cast<const char *>(data), size);
  if (in.size() < 2)
    return 0;
  const unsigned flags = static_cast<unsigned char>(in[0]);
  const unsigned step = static_cast<unsigned char>(in[1]);
  in.remove_prefix(2);
  static const fs::path root =
      fs::temp_directory_path() /
      ("braid-resume-fuzz-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(root, ec);
  const fs::path dir = root / ((flags & 2) ? checkpointDirName(step) : "ckpt");
  fs::create_directories(dir, ec);
  std::vector<std::string> files;
  if (flags & 4)
    files.push_back(ckpt::kConfigFile);
  if (flags & 8)
    files.insert(files.end(), {ckpt::kModelIndexFile, ckpt::shardFileName(1, 2),
                               ckpt::shardFileName(2, 2)});
  else
    files.push_back(ckpt::kModelFile);
  files.push_back(ckpt::kOptimizerFile);
  for (const std::string &file : files)
    write(dir / file, take(in));
  if (flags & 1) {
    ckpt::Manifest m;
    m.formatVersion = kCheckpointFormatVersion;
    m.step = step;
    for (const std::string &file : files) {
      absl::StatusOr<ckpt::FileDigest> d =
          ckpt::digestFile((dir / file).string());
      if (d.ok())
        m.files.push_back(*d);
    }
    write(dir / ckpt::kManifestFile, ckpt::formatManifest(m));
  } else {
    write(dir / ckpt::kManifestFile, in);
  }

  Trainer &t = trainer();
  if (!t.resume(((flags & 2) ? root : dir).string()).ok())
    return 0;
  // Accepted: the state is finite and one more step trains.
  for (uint32_t id : t.plan().parameters) {
    absl::StatusOr<absl::Span<float>> v =
        t.f32Tensor(t.plan().proto.tensors(id).name());
    for (float x : *v)
      if (!std::isfinite(x))
        std::abort();
  }
  if (t.stepsDone() < t.totalSteps())
    (void)t.trainStep();
  return 0;
}
