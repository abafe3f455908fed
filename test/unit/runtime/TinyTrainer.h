// A Trainer for the tiny plan on tinyshakespeare, for tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/train/Trainer.h"
#include "test/unit/runtime/TinyModelPlan.h"

namespace braid::test {

// The corpus every runtime test trains on.
std::string shakespearePath();

// Loads `plan` with testKernelRegistry() and builds a Trainer on the corpus.
// Fails the current test (and returns null) when anything is refused.
std::unique_ptr<Trainer> tinyTrainer(const plan::Plan &plan,
                                     const TrainerOptions &options = {});
std::unique_ptr<Trainer> tinyTrainer(const TinyModelOptions &model = {},
                                     const TrainerOptions &options = {});

// Copies of every parameter and optimizer moment, in plan order.
std::vector<std::vector<float>> trainedState(Trainer &trainer);

// This test process's own scratch directory (created on first use), so that
// concurrent test runs never share files.
std::string scratchDir();

// A fresh empty directory under scratchDir().
std::string freshDir(const std::string &name);

} // namespace braid::test
