// The kernel registry, parameters and descriptors; the default registry
// holds exactly the catalogue of docs/kernels.md.
#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/CpuKernels.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/ValidLaunches.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using ::testing::HasSubstr;

// Kernel names from the first column of the catalogue table.
std::vector<std::string> catalogueNames() {
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/docs/kernels.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/kernels.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::regex row(R"(\n\| `([a-z_0-9]+)` \|)");
  std::vector<std::string> names;
  for (std::sregex_iterator it(s.begin(), s.end(), row), end; it != end; ++it)
    names.push_back((*it)[1]);
  std::sort(names.begin(), names.end());
  return names;
}

#if BRAID_HAVE_CUDA
// The kernels with a CPU context-parallel path (`cp`) and none on CUDA.
bool refusesCpOnCuda(const std::string &name) {
  return name == "attention" || name == "attention_grad_input" ||
         name == "flash_attention" || name == "flash_attention_grad_input";
}
#endif

TEST(DefaultRegistry, HoldsExactlyTheCatalogue) {
  const std::vector<std::string> want = catalogueNames();
  ASSERT_GE(want.size(), 30u);
  const KernelRegistry &r = defaultKernelRegistry();
  std::vector<std::string> have;
  for (std::string_view n : r.names(Device::kCPU))
    have.emplace_back(n);
  EXPECT_EQ(have, want);
  for (const std::string &n : want) {
    const KernelDef *def = r.find(n, Device::kCPU);
    ASSERT_NE(def, nullptr) << n;
    EXPECT_EQ(def->name, n);
    EXPECT_NE(def->check, nullptr);
    EXPECT_NE(def->run, nullptr);
#if BRAID_HAVE_CUDA
    // Every kernel has a CUDA twin with the same, shared check, but for the
    // attention kernels, whose CUDA check refuses cp = 1 first
    // (CudaAttentionCheck below).
    const KernelDef *gpu = r.find(n, Device::kCUDA);
    ASSERT_NE(gpu, nullptr) << n;
    if (refusesCpOnCuda(n))
      EXPECT_NE(gpu->check, def->check) << n;
    else
      EXPECT_EQ(gpu->check, def->check) << n;
    EXPECT_NE(gpu->run, nullptr) << n;
#else
    EXPECT_EQ(r.find(n, Device::kCUDA), nullptr);
#endif
  }
  EXPECT_EQ(r.find("no_such_kernel", Device::kCPU), nullptr);
#if !BRAID_HAVE_CUDA
  EXPECT_TRUE(r.names(Device::kCUDA).empty());
#endif
}

#if BRAID_HAVE_CUDA
// The CUDA attention kernels' check is the shared one, after refusing a
// context-parallel launch (cp = 1), which only the CPU kernels implement.
TEST(DefaultRegistry, CudaAttentionCheckRefusesContextParallel) {
  const std::map<std::string, test::Sig> launches = test::validLaunches();
  for (const char *name : {"attention", "attention_grad_input",
                           "flash_attention", "flash_attention_grad_input"}) {
    const KernelDef *gpu = defaultKernelRegistry().find(name, Device::kCUDA);
    ASSERT_NE(gpu, nullptr) << name;
    test::Sig s = launches.at(name);
    EXPECT_TRUE(gpu->check({s.ins, s.outs, &s.params}).ok()) << name;
    s.params.setInt("cp", 0);
    EXPECT_TRUE(gpu->check({s.ins, s.outs, &s.params}).ok()) << name;
    s.params.setInt("cp", 1);
    const absl::Status st = gpu->check({s.ins, s.outs, &s.params});
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(std::string(name) +
                          ": context-parallel attention (cp = 1) has no CUDA "
                          "kernel yet; train context-parallel plans on the "
                          "CPU"));
    // Without cp the shared check decides.
    s.params.setInt("cp", 0);
    s.ins[0].shape[2] = 5;
    EXPECT_FALSE(gpu->check({s.ins, s.outs, &s.params}).ok()) << name;
  }
}
#endif

TEST(DefaultRegistry, IsBuiltOnceAcrossThreads) {
  std::vector<const KernelRegistry *> seen(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { seen[i] = &defaultKernelRegistry(); });
  for (std::thread &t : threads)
    t.join();
  for (const KernelRegistry *r : seen)
    EXPECT_EQ(r, &defaultKernelRegistry());
}

absl::Status okCheck(const KernelSignature &) { return absl::OkStatus(); }
void noRun(const KernelArgs &) {}

TEST(KernelRegistry, RefusesDuplicatesAndIncompleteDefinitions) {
  KernelRegistry r;
  ASSERT_TRUE(registerCpuKernels(r).ok());
  absl::Status again = registerCpuKernels(r);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.message()), HasSubstr("already registered"));

  EXPECT_FALSE(r.add(KernelDef{"", Device::kCPU, okCheck, noRun}).ok());
  EXPECT_THAT(
      std::string(
          r.add(KernelDef{"x", Device::kCPU, nullptr, noRun}).message()),
      HasSubstr("lacks a check or run"));
  // The same name on another device is a different entry.
  EXPECT_TRUE(r.add(KernelDef{"linear", Device::kCUDA, okCheck, noRun}).ok());
  EXPECT_EQ(r.find("linear", Device::kCUDA)->run, &noRun);
}

TEST(KernelParams, TypedAccessAndFallbacks) {
  KernelParams p;
  p.setInt("num_heads", 8);
  p.setFloat("eps", 1e-5);
  p.setInt("scale", 2);
  p.setInt("num_heads", 4); // replaces
  EXPECT_TRUE(p.has("eps"));
  EXPECT_FALSE(p.has("theta"));
  EXPECT_EQ(*p.getInt("num_heads"), 4);
  EXPECT_DOUBLE_EQ(*p.getFloat("eps"), 1e-5);
  EXPECT_DOUBLE_EQ(*p.getFloat("scale"), 2.0); // ints widen to float
  EXPECT_EQ(p.getInt("eps").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.getInt("eps").status().message()),
              HasSubstr("'eps' is a float"));
  EXPECT_EQ(p.getFloat("theta").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.intOr("missing", 7), 7);
  EXPECT_EQ(p.intOr("eps", 7), 7);
  EXPECT_DOUBLE_EQ(p.floatOr("missing", 0.5), 0.5);
  EXPECT_EQ(p.toString(), "{num_heads=4, eps=1e-05, scale=2}");
}

TEST(TensorDesc, SizesAndDTypes) {
  TensorDesc scalar{{}, DType::kF32};
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.lastDim(), 1);
  EXPECT_EQ(scalar.rows(), 1);
  TensorDesc t{{2, 3, 5}, DType::kI32};
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.lastDim(), 5);
  EXPECT_EQ(dtypeName(DType::kF32), "f32");
  EXPECT_EQ(dtypeName(DType::kBF16), "bf16");
  EXPECT_EQ(dtypeName(DType::kI32), "i32");
  EXPECT_EQ(dtypeSize(DType::kF32), 4);
  EXPECT_EQ(dtypeSize(DType::kBF16), 2);
  EXPECT_EQ(dtypeSize(DType::kI32), 4);
}

} // namespace
} // namespace braid
