// Learning: 300 steps of llama-tiny on tinyshakespeare (bytes) must end at
// least 0.5 nats below the corpus's byte-unigram entropy, i.e. the model has
// learned more than how often each byte occurs.
#include <array>
#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "runtime/data/TokenData.h"
#include "runtime/train/Trainer.h"
#include "test/support/CompiledModel.h"

namespace braid {
namespace {

double unigramEntropyNats(const TokenData &data) {
  std::array<double, 256> counts{};
  for (int64_t i = 0; i < data.size(); ++i)
    counts[data[i]] += 1;
  double h = 0;
  for (double c : counts)
    if (c > 0) {
      double p = c / static_cast<double>(data.size());
      h -= p * std::log(p);
    }
  return h;
}

TEST(Learning, LlamaTinyBeatsByteUnigramEntropy) {
  auto plan = testing::compileModel("llama-tiny");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->proto.train().steps(), 300);
  auto data = TokenData::fromFile(testing::corpusPath(), TokenFormat::kText,
                                  plan->proto.model().vocab_size());
  ASSERT_TRUE(data.ok()) << data.status();
  double entropy = unigramEntropyNats(*data);

  auto trainer = Trainer::create(std::move(*plan), *data, TrainerOptions{});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double first = 0, last10 = 0;
  for (int step = 1; step <= 300; ++step) {
    auto r = (*trainer)->trainStep();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(std::isfinite(r->loss)) << "step " << step;
    if (step == 1)
      first = r->loss;
    if (step > 290)
      last10 += r->loss / 10;
  }
  std::printf("byte-unigram entropy %.4f nats; loss %.4f at step 1, %.4f "
              "over steps 291-300 (%.4f below the entropy)\n",
              entropy, first, last10, entropy - last10);
  EXPECT_LE(last10, entropy - 0.5);
}

}  // namespace
}  // namespace braid
