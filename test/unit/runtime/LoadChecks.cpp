#include "test/unit/runtime/LoadChecks.h"

#include "runtime/plan/PlanLoader.h"
#include "test/unit/runtime/TestKernels.h"
#include "gtest/gtest.h"

namespace braid::test {

absl::Status loadOnCpu(const plan::Plan &p) {
  return loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU)
      .status();
}

void expectRefused(const plan::Plan &p, const std::string &fragment) {
  absl::Status s = loadOnCpu(p);
  ASSERT_FALSE(s.ok()) << "expected a refusal containing: " << fragment;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos)
      << "message: " << s.message() << "\nexpected to contain: " << fragment;
}

uint32_t idOf(const plan::Plan &p, const std::string &name) {
  for (const plan::Tensor &t : p.tensors())
    if (t.name() == name)
      return t.id();
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

} // namespace braid::test
