#include "test/unit/runtime/TinyTrainer.h"

#include <filesystem>

#include <unistd.h>

#include "test/unit/runtime/TestKernels.h"
#include "gtest/gtest.h"

namespace braid::test {

std::string shakespearePath() {
  return std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt";
}

std::unique_ptr<Trainer> tinyTrainer(const plan::Plan &plan,
                                     const TrainerOptions &options) {
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(plan.SerializeAsString(), testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok())
    return nullptr;
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(shakespearePath(), TokenFormat::kText, 256);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok())
    return nullptr;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(std::move(*loaded), std::move(*data), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? std::move(*trainer) : nullptr;
}

std::unique_ptr<Trainer> tinyTrainer(const TinyModelOptions &model,
                                     const TrainerOptions &options) {
  return tinyTrainer(tinyModelPlan(model), options);
}

std::vector<std::vector<float>> trainedState(Trainer &trainer) {
  std::vector<std::vector<float>> out;
  const plan::Plan &plan = trainer.plan().proto;
  for (uint32_t id : trainer.plan().parameters) {
    const plan::Tensor &t = plan.tensors(id);
    for (uint32_t part : {id, t.param().exp_avg(), t.param().exp_avg_sq()}) {
      absl::StatusOr<absl::Span<float>> v =
          trainer.f32Tensor(plan.tensors(part).name());
      EXPECT_TRUE(v.ok()) << v.status();
      out.emplace_back(v->begin(), v->end());
    }
  }
  return out;
}

namespace {

// Removed when the test process exits, so that runs leave nothing behind.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir()
      : path(std::filesystem::path(::testing::TempDir()) /
             ("braid-runtime-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

} // namespace

std::string scratchDir() {
  static const ScratchDir dir;
  return dir.path.string();
}

std::string freshDir(const std::string &name) {
  std::filesystem::path dir = std::filesystem::path(scratchDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

} // namespace braid::test
