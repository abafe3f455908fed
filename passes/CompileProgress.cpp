//===- CompileProgress.cpp - notes on long compilations -------------------===//
//
// A watcher thread prints the notes, so that one long pass still gets them;
// the instrumentation only tells it which pass is running.
//
//===----------------------------------------------------------------------===//
#include "passes/CompileProgress.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Support/Timing.h"

using namespace mlir;

namespace braid {
namespace {

llvm::cl::opt<double> progressAfter(
    "compile-progress-after",
    llvm::cl::desc("Seconds of compilation before the first 'still "
                   "compiling' note; negative: no notes"),
    llvm::cl::init(3.0), llvm::cl::Hidden);
llvm::cl::opt<double> progressEvery(
    "compile-progress-every",
    llvm::cl::desc("Seconds between further 'still compiling' notes"),
    llvm::cl::init(10.0), llvm::cl::Hidden);

using Clock = std::chrono::steady_clock;

class CompileProgress : public PassInstrumentation {
public:
  CompileProgress(StringRef tool, double after, double every)
      : tool_(tool.str()), start_(Clock::now()) {
    if (after >= 0)
      watcher_ = std::thread([this, after, every] { watch(after, every); });
  }

  ~CompileProgress() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    if (watcher_.joinable())
      watcher_.join();
  }

  // A stack, because an adaptor pass runs the passes nested in it.
  void runBeforePass(Pass *pass, Operation *) override {
    std::lock_guard<std::mutex> lock(mutex_);
    StringRef name = pass->getArgument();
    running_.push_back((name.empty() ? pass->getName() : name).str());
  }
  void runAfterPass(Pass *, Operation *) override { pop(); }
  void runAfterPassFailed(Pass *, Operation *) override { pop(); }

private:
  void pop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_.empty())
      running_.pop_back();
  }

  void watch(double after, double every) {
    auto due = start_ + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(after));
    auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::max(every, 0.1)));
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_until(lock, due, [this] { return done_; })) {
      double seconds =
          std::chrono::duration<double>(Clock::now() - start_).count();
      std::string note;
      llvm::raw_string_ostream os(note);
      os << tool_ << ": still compiling ("
         << llvm::format("%.1f", seconds) << " s so far";
      if (!running_.empty())
        os << ", now in " << running_.back();
      os << ")\n";
      // stdio locks the stream; llvm::errs() belongs to the compiling
      // thread.
      std::fputs(note.c_str(), stderr);
      due += period;
    }
  }

  std::string tool_;
  Clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::vector<std::string> running_;
  std::thread watcher_;
};

} // namespace

void addCompileInstrumentation(PassManager &pm, StringRef tool) {
  pm.addInstrumentation(
      std::make_unique<CompileProgress>(tool, progressAfter, progressEvery));
  // Last, so that the timers do not count the other instrumentation.
  auto timing = std::make_unique<DefaultTimingManager>();
  applyDefaultTimingManagerCLOptions(*timing);
  pm.enableTiming(std::move(timing));
}

} // namespace braid
