#include "test/unit/runtime/TestKernels.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>

#include "kernels/cpu/CpuKernels.h"

namespace braid::test {
namespace {

std::mutex gLogMutex;
std::vector<int64_t> gLog;

absl::Status checkLog(const KernelSignature &sig) {
  if (!sig.ins.empty() || !sig.outs.empty())
    return absl::InvalidArgumentError("test.log takes no operands");
  return sig.params->getInt("id").status();
}

void runLog(const KernelArgs &args) {
  int64_t ms = args.params->intOr("sleep_ms", 0);
  if (ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLog.push_back(args.params->intOr("id", -1));
}

absl::Status checkTouch(const KernelSignature &) { return absl::OkStatus(); }
void runTouch(const KernelArgs &) {}

absl::Status checkStop(const KernelSignature &sig) {
  return sig.params->getInt("step").status();
}

void runStop(const KernelArgs &args) {
  if (args.ctx->step == args.params->intOr("step", 0) &&
      args.microBatch == 0)
    std::raise(SIGTERM);
}

absl::Status checkPoison(const KernelSignature &sig) {
  if (sig.outs.size() != 1 || sig.outs[0].dtype != DType::kF32)
    return absl::InvalidArgumentError("test.poison writes one f32 tensor");
  return sig.params->getInt("step").status();
}

void runPoison(const KernelArgs &args) {
  if (args.ctx->step == args.params->intOr("step", 0))
    args.outs[0].f32()[0] = std::numeric_limits<float>::quiet_NaN();
}

} // namespace

const KernelRegistry &testKernelRegistry() {
  static const KernelRegistry *registry = [] {
    auto *r = new KernelRegistry();
    if (!registerCpuKernels(*r).ok() ||
        !r->add({"test.log", Device::kCPU, checkLog, runLog}).ok() ||
        !r->add({"test.touch", Device::kCPU, checkTouch, runTouch}).ok() ||
        !r->add({"test.stop", Device::kCPU, checkStop, runStop}).ok() ||
        !r->add({"test.poison", Device::kCPU, checkPoison, runPoison}).ok())
      std::abort();
    return r;
  }();
  return *registry;
}

std::vector<int64_t> eventLog() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  return gLog;
}

void clearEventLog() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLog.clear();
}

} // namespace braid::test
