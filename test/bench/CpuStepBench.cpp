// CPU training-step benchmark: one full optimizer step (forward, backward,
// clipping, AdamW) of each plan named on the command line, plus the sgemm
// rate that is the MFU denominator. run_cpu_bench.sh runs it next to the
// PyTorch peer and prints the ratios.
//
//   braid_cpu_bench --plan=small=small.plan --plan=medium=medium.plan
//                   [--threads=N] [benchmark flags]
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "cblas.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/registry/Kernel.h"
#include "runtime/data/TokenData.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/Trainer.h"

namespace braid {
namespace {

int gThreads = 0;

// Square sgemm at the sizes where OpenBLAS reaches its peak on this machine.
void BM_Sgemm(benchmark::State &state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flops"] = benchmark::Counter(
      2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

// Uniform random tokens: the data does not change the work of a step.
TokenData randomTokens(int64_t vocab, int64_t count) {
  std::mt19937 gen(1234);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab) - 1);
  std::string bytes(count * sizeof(int32_t), '\0');
  for (int64_t i = 0; i < count; ++i) {
    int32_t t = dist(gen);
    std::memcpy(&bytes[i * sizeof(int32_t)], &t, sizeof(t));
  }
  auto data = TokenData::fromBytes(std::move(bytes), TokenFormat::kInt32,
                                   vocab, "random tokens");
  return std::move(*data);
}

void BM_TrainStep(benchmark::State &state, std::string planPath) {
  auto plan = loadPlanFile(planPath, defaultKernelRegistry(), Device::kCPU);
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  const plan::Plan &p = plan->proto;
  const double flopsPerToken = p.model().flops_per_token();
  const uint64_t activationPeak = p.memory().activation_peak_bytes();
  TrainerOptions options;
  options.numThreads = gThreads;
  options.totalSteps = 1 << 20;
  TokenData data = randomTokens(p.model().vocab_size(), 1 << 20);
  auto trainer = Trainer::create(std::move(*plan), std::move(data), options);
  if (!trainer.ok()) {
    state.SkipWithError(std::string(trainer.status().message()).c_str());
    return;
  }
  const double tokens = static_cast<double>((*trainer)->tokensPerStep());
  // Untimed warm-up, as for the PyTorch peer: the first steps touch the
  // arena's pages and the optimizer state for the first time.
  for (int i = 0; i < 2; ++i)
    if (!(*trainer)->trainStep().ok()) {
      state.SkipWithError("warm-up step failed");
      return;
    }
  for (auto _ : state) {
    auto r = (*trainer)->trainStep();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["model_flops"] = benchmark::Counter(
      tokens * flopsPerToken, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = (*trainer)->numThreads();
  state.counters["steps_per_s"] =
      benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["activation_peak_bytes"] =
      static_cast<double>(activationPeak);
}

}  // namespace
}  // namespace braid

int main(int argc, char **argv) {
  std::vector<char *> rest = {argv[0]};
  std::vector<std::pair<std::string, std::string>> plans;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--plan=", 0) == 0) {
      std::string spec = arg.substr(7);
      size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--plan takes NAME=PATH, got '%s'\n",
                     spec.c_str());
        return 2;
      }
      plans.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (arg.rfind("--threads=", 0) == 0) {
      braid::gThreads = std::atoi(arg.c_str() + 10);
    } else {
      rest.push_back(argv[i]);
    }
  }
  benchmark::RegisterBenchmark("sgemm", braid::BM_Sgemm)
      ->Arg(1024)
      ->Arg(2048)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (auto &[name, path] : plans)
    benchmark::RegisterBenchmark(("train_step/" + name).c_str(),
                                 braid::BM_TrainStep, path)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(3.0);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
