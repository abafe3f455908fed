#include "test/support/CompiledModel.h"

#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/registry/Kernel.h"

namespace braid::testing {

absl::StatusOr<LoadedPlan> compileModel(const std::string &model) {
  // One folder per process: tests run in parallel.
  std::string dir = absl::StrCat(::testing::TempDir(), "/braid-", getpid(),
                                 "-", model);
  std::filesystem::create_directories(dir);
  std::string plan = dir + "/" + model + ".plan";
  std::string cmd = absl::StrCat(BRAID_BINARY_DIR, "/bin/braidc ",
                                 BRAID_SOURCE_DIR, "/models/", model,
                                 ".pbtxt -o ", plan, " 2>/dev/null");
  if (std::system(cmd.c_str()) != 0)
    return absl::InternalError(absl::StrCat("braidc failed: ", cmd));
  return loadPlanFile(plan, defaultKernelRegistry(), Device::kCPU);
}

std::string corpusPath() {
  return std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt";
}

}  // namespace braid::testing
