// The Trainer on the tiny real-kernel plan: initial weights, inputs, the
// step protocol, tensor access, multi-stream equivalence and bit-exact
// resume.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/Random.h"
#include "runtime/data/TokenData.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::TinyModelOptions;
using test::tinyModelPlan;
using test::tinyTrainer;
using test::trainedState;

std::vector<float> copyOf(Trainer &t, const std::string &name) {
  absl::StatusOr<absl::Span<float>> v = t.f32Tensor(name);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? std::vector<float>(v->begin(), v->end())
                : std::vector<float>();
}

bool allZero(const std::vector<float> &v) {
  for (float x : v)
    if (x != 0)
      return false;
  return true;
}

TEST(Trainer, InitialWeightsFollowTheDocumentedRule) {
  auto trainer = tinyTrainer();
  ASSERT_NE(trainer, nullptr);
  std::vector<float> embed = copyOf(*trainer, "model.embed_tokens.weight");
  // Goldens from an independent Python implementation of docs/numerics.md
  // (seed 1234, std 0.5).
  EXPECT_EQ(embed[0], 0x1.984666p-2f);
  EXPECT_EQ(embed[1], -0x1.9f9adcp-5f);
  EXPECT_EQ(embed[2], 0x1.7641bp-2f);
  EXPECT_EQ(embed[3], 0x1.17bad2p-1f);
  // And in general: element i is float(std * normal(key, i)).
  const uint64_t key = rng::parameterKey(1234, "lm_head.weight");
  std::vector<float> head = copyOf(*trainer, "lm_head.weight");
  for (size_t i = 0; i < head.size(); i += 97)
    ASSERT_EQ(head[i], static_cast<float>(0.1f * rng::normal(key, i)))
        << "element " << i;
  for (float x : copyOf(*trainer, "model.norm.weight"))
    ASSERT_EQ(x, 1.0f);
  EXPECT_TRUE(allZero(copyOf(*trainer, "lm_head.weight.grad")));
  EXPECT_TRUE(allZero(copyOf(*trainer, "lm_head.weight.exp_avg")));

  // Reproducible, and a function of the seed.
  auto again = tinyTrainer();
  EXPECT_EQ(trainedState(*trainer), trainedState(*again));
  plan::Plan other = tinyModelPlan();
  other.mutable_train()->set_seed(1235);
  auto reseeded = tinyTrainer(other);
  EXPECT_NE(copyOf(*reseeded, "lm_head.weight"), head);
}

TEST(Trainer, FillsInputsFromTheDataInSampleOrder) {
  TinyModelOptions model;
  model.positions = true;
  auto trainer = tinyTrainer(model);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(test::shakespearePath(), TokenFormat::kText, 256);
  ASSERT_TRUE(data.ok());
  // After step 1 the inputs hold its last micro-batch (m = 1): samples
  // (0 * M + 1) * B + b = 2 + b, i.e. windows 2 and 3 of S = 8.
  absl::StatusOr<absl::Span<uint8_t>> tokens = trainer->tensorBytes("tokens");
  absl::StatusOr<absl::Span<uint8_t>> labels = trainer->tensorBytes("labels");
  absl::StatusOr<absl::Span<uint8_t>> pos = trainer->tensorBytes("positions");
  ASSERT_TRUE(tokens.ok() && labels.ok() && pos.ok());
  const auto *t = reinterpret_cast<const int32_t *>(tokens->data());
  const auto *l = reinterpret_cast<const int32_t *>(labels->data());
  const auto *p = reinterpret_cast<const int32_t *>(pos->data());
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 8; ++s) {
      EXPECT_EQ(t[b * 8 + s], (*data)[(2 + b) * 8 + s]);
      EXPECT_EQ(l[b * 8 + s], (*data)[(2 + b) * 8 + s + 1]);
      EXPECT_EQ(p[b * 8 + s], s);
    }
  EXPECT_EQ(trainer->dataCursor(), 4);
}

TEST(Trainer, StepsFollowTheProtocol) {
  TinyModelOptions model;
  model.steps = 2;
  auto trainer = tinyTrainer(model);
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->totalSteps(), 2);
  EXPECT_EQ(trainer->tokensPerStep(), 2 * 2 * 8);

  std::vector<float> before = copyOf(*trainer, "lm_head.weight");
  absl::StatusOr<StepResult> first = trainer->trainStep();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->step, 1);
  // Random init over 256 classes: close to ln(256).
  EXPECT_NEAR(first->loss, std::log(256.0), 1.0);
  EXPECT_GT(first->gradNorm, 0.0f);
  EXPECT_FALSE(first->skipped);
  EXPECT_EQ(trainer->stepsDone(), 1);
  // The optimizer updated the weights; the step's gradients stay until the
  // next step starts from zero.
  EXPECT_NE(copyOf(*trainer, "lm_head.weight"), before);
  std::vector<float> grad1 = copyOf(*trainer, "lm_head.weight.grad");
  EXPECT_FALSE(allZero(grad1));

  absl::StatusOr<StepResult> step = trainer->trainStep();
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->step, 2);
  EXPECT_DOUBLE_EQ(step->lr, trainer->learningRate(2));
  EXPECT_NE(copyOf(*trainer, "lm_head.weight.grad"), grad1);
  absl::Status done = trainer->trainStep().status();
  EXPECT_EQ(done.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(done.message(), "training is complete: 2 of 2 steps are done");
}

TEST(Trainer, GivesAccessToTensorsByName) {
  auto trainer = tinyTrainer();
  ASSERT_NE(trainer, nullptr);
  absl::StatusOr<absl::Span<float>> head = trainer->f32Tensor("lm_head.weight");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size(), 256u * 16u);
  (*head)[0] = 42.0f; // writable, and the same memory on the next read
  EXPECT_EQ((*trainer->f32Tensor("lm_head.weight"))[0], 42.0f);
  EXPECT_EQ(trainer->f32Tensor("nope").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(trainer->f32Tensor("tokens").status().message(),
            "tensor \"tokens\" is i32, not f32");
  EXPECT_EQ(trainer->tensorBytes("tokens")->size(), 2u * 8u * 4u);
}

TEST(Trainer, LossFallsOnRealText) {
  TinyModelOptions model;
  model.steps = 40;
  auto trainer = tinyTrainer(model);
  ASSERT_NE(trainer, nullptr);
  double first = 0, lastMean = 0;
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<StepResult> r = trainer->trainStep();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(std::isfinite(r->loss));
    if (i == 0)
      first = r->loss;
    if (i >= 30)
      lastMean += r->loss / 10;
  }
  EXPECT_LT(lastMean, first - 0.5) << "first " << first << " last " << lastMean;
}

TEST(Trainer, TwoStreamsGiveBitwiseTheSameTraining) {
  TinyModelOptions twoStreams;
  twoStreams.twoStreams = true;
  auto a = tinyTrainer();
  auto b = tinyTrainer(twoStreams);
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<StepResult> ra = a->trainStep();
    absl::StatusOr<StepResult> rb = b->trainStep();
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->loss, rb->loss);
    EXPECT_EQ(ra->gradNorm, rb->gradNorm);
  }
  EXPECT_EQ(trainedState(*a), trainedState(*b));
}

// The plain schedule stated once in a Repeat trains as the same schedule
// written out micro-batch by micro-batch.
TEST(Trainer, ARepeatedMicroBatchTrainsAsTheUnrolledOne) {
  TinyModelOptions repeated;
  repeated.repeated = true;
  auto a = tinyTrainer();
  auto b = tinyTrainer(repeated);
  ASSERT_TRUE(a && b);
  EXPECT_LT(b->plan().proto.ByteSizeLong(), a->plan().proto.ByteSizeLong());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<StepResult> ra = a->trainStep();
    absl::StatusOr<StepResult> rb = b->trainStep();
    ASSERT_TRUE(ra.ok() && rb.ok()) << rb.status();
    EXPECT_EQ(ra->loss, rb->loss);
    EXPECT_EQ(ra->gradNorm, rb->gradNorm);
  }
  EXPECT_EQ(trainedState(*a), trainedState(*b));
}

// Runs N steps straight through, and k steps + save + a new Trainer that
// resumes + N - k steps: every loss and every weight must agree bitwise.
void expectBitExactResume(const TrainerOptions &options, const char *dir) {
  const int kTotal = 6, kSplit = 3;
  TinyModelOptions model;
  model.steps = kTotal;
  model.transposedHead = true;
  model.embeddingAlias = "tied.embedding";
  auto straight = tinyTrainer(model, options);
  ASSERT_NE(straight, nullptr);
  std::vector<double> losses;
  for (int i = 0; i < kTotal; ++i)
    losses.push_back(straight->trainStep()->loss);

  auto first = tinyTrainer(model, options);
  for (int i = 0; i < kSplit; ++i)
    EXPECT_EQ(first->trainStep()->loss, losses[i]);
  absl::StatusOr<std::string> saved =
      first->saveCheckpoint(test::freshDir(dir));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_NE(saved->find("step-000003"), std::string::npos);

  TrainerOptions fresh = options;
  fresh.totalSteps = 0; // taken from the checkpoint
  auto second = tinyTrainer(model, fresh);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<ResumeReport> from = second->resume(*saved);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_TRUE(from->changes.empty());
  EXPECT_EQ(second->stepsDone(), kSplit);
  EXPECT_EQ(second->totalSteps(), kTotal);
  EXPECT_EQ(second->dataCursor(), kSplit * 2 * 2);
  for (int i = kSplit; i < kTotal; ++i)
    EXPECT_EQ(second->trainStep()->loss, losses[i]) << "step " << i + 1;
  EXPECT_EQ(trainedState(*second), trainedState(*straight));
}

TEST(Trainer, ResumeIsBitExact) {
  expectBitExactResume({}, "resume-sequential");
}

TEST(Trainer, ResumeIsBitExactWithShuffledData) {
  TrainerOptions options;
  options.shuffle = true;
  expectBitExactResume(options, "resume-shuffled");
}

TEST(Trainer, ResumeRefusesAnotherShuffleSettingOrSeed) {
  auto trainer = tinyTrainer();
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> saved =
      trainer->saveCheckpoint(test::freshDir("resume-refusals"));
  ASSERT_TRUE(saved.ok());

  TrainerOptions shuffled;
  shuffled.shuffle = true;
  auto other = tinyTrainer(TinyModelOptions(), shuffled);
  absl::StatusOr<ResumeReport> r = other->resume(*saved);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message())
                .find("was saved by a run without --shuffle: resume it the "
                      "same way"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(other->stepsDone(), 0);

  plan::Plan reseeded = tinyModelPlan();
  reseeded.mutable_train()->set_seed(7);
  auto third = tinyTrainer(reseeded);
  r = third->resume(*saved);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message())
                .find("train.seed is \"1234\" in the checkpoint but \"7\" "
                      "in the plan"),
            std::string::npos)
      << r.status();
}

// A checkpoint resumes only with a plan it belongs to: every differing
// field is named; the learning-rate settings and the run length may change
// when the user says so, and the report says what changed.
TEST(Trainer, ResumeComparesThePlanIdentity) {
  auto trainer = tinyTrainer();
  ASSERT_TRUE(trainer->trainStep().ok());
  absl::StatusOr<std::string> saved =
      trainer->saveCheckpoint(test::freshDir("resume-identity"));
  ASSERT_TRUE(saved.ok());

  plan::Plan changed = tinyModelPlan();
  changed.mutable_train()->set_lr(0.002);
  changed.mutable_train()->set_steps(12);
  changed.set_name("renamed");
  auto other = tinyTrainer(changed);
  absl::StatusOr<ResumeReport> r = other->resume(*saved);
  ASSERT_FALSE(r.ok());
  const std::string message(r.status().message());
  EXPECT_NE(message.find("does not belong to this plan: name is "
                         "\"tiny-model\" in the checkpoint but \"renamed\" in "
                         "the plan; train.steps is \"6\" in the checkpoint but "
                         "\"12\" in the plan; train.lr is \"0.01\" in the "
                         "checkpoint but \"0.002\" in the plan. To continue"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("pass --allow-change=name,steps,lr"),
            std::string::npos)
      << message;
  EXPECT_EQ(other->stepsDone(), 0);

  r = other->resume(*saved, {"name", "train.steps", "train.lr"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->changes,
            (std::vector<std::string>{"name: tiny-model -> renamed",
                                      "train.lr: 0.01 -> 0.002",
                                      "run length: 6 -> 12 steps"}));
  EXPECT_EQ(other->totalSteps(), 12);
  EXPECT_DOUBLE_EQ(other->learningRate(12), changed.train().min_lr());

  // The shapes of training never change mid-run, whatever is allowed.
  TinyModelOptions four;
  four.numMicroBatches = 4;
  auto third = tinyTrainer(four);
  r = third->resume(*saved, {"train.lr"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message())
                .find("train.global_batch_size is \"4\" in the checkpoint but "
                      "\"8\" in the plan. Resume with the plan it was saved "
                      "from"),
            std::string::npos)
      << r.status();
}

TEST(Trainer, ExplicitTotalOverridesTheCheckpoint) {
  auto trainer = tinyTrainer();
  ASSERT_TRUE(trainer->trainStep().ok());
  std::string dir = test::freshDir("resume-total");
  ASSERT_TRUE(trainer->saveCheckpoint(dir).ok());
  TrainerOptions longer;
  longer.totalSteps = 50;
  auto resumed = tinyTrainer(TinyModelOptions(), longer);
  // A directory of checkpoints resumes from its latest.
  absl::StatusOr<ResumeReport> from = resumed->resume(dir);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(from->changes,
            std::vector<std::string>{"run length: 6 -> 50 steps"});
  EXPECT_EQ(resumed->totalSteps(), 50);
  EXPECT_EQ(resumed->stepsDone(), 1);
}

TEST(Trainer, RefusesDataTooShortForAWindow) {
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(tinyModelPlan().SerializeAsString(), test::testKernelRegistry(),
               Device::kCPU);
  ASSERT_TRUE(plan.ok());
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::create(
      std::move(*plan),
      *TokenData::fromBytes("short", TokenFormat::kText, 256, "short.txt"), {});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("holds 5 tokens"),
            std::string::npos);
}

} // namespace
} // namespace braid
