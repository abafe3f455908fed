// NCCL loaded at run time (runtime/comm/nccl/NcclApi.h), on every machine:
// the libraries searched, the error that names them when none loads or the
// one that loads is not NCCL, and the ABI values declared without nccl.h.
// Where an NCCL is found (BRAID_NCCL_LIBRARY, or PyTorch's wheel), it is
// loaded, and its unique id made, which needs no GPU.
#include "runtime/comm/nccl/NcclApi.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#if __has_include(<nccl.h>) && __has_include(<cuda_runtime.h>)
#include <nccl.h>
#define BRAID_TEST_HAVE_NCCL_H 1
#endif

namespace braid::nccl {
namespace {

// Sets (or with nullopt unsets) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, std::optional<std::string> value)
      : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

TEST(NcclApi, DeclaresNcclsValuesForTheRuntimesDTypes) {
  // nccl.h: ncclInt32 = 2, ncclFloat32 = 7, ncclBfloat16 = 9, ncclSum = 0.
  EXPECT_EQ(dataType(DType::kF32), 7);
  EXPECT_EQ(dataType(DType::kI32), 2);
  EXPECT_EQ(dataType(DType::kBF16), 9);
  EXPECT_EQ(kSum, 0);
  EXPECT_EQ(kUint8, 1);
  EXPECT_EQ(sizeof(UniqueId), 128u);
  EXPECT_STREQ(resultName(kInvalidUsage), "ncclInvalidUsage");
  EXPECT_STREQ(resultName(kInProgress), "ncclInProgress");
  EXPECT_STREQ(resultName(static_cast<Result>(42)),
               "an NCCL result not known to this build");
}

TEST(NcclApi, MatchesTheNcclHeaderWhereOneIsInstalled) {
#if BRAID_TEST_HAVE_NCCL_H
  static_assert(sizeof(ncclUniqueId) == sizeof(UniqueId));
  static_assert(NCCL_UNIQUE_ID_BYTES == kUniqueIdBytes);
  constexpr auto same = [](auto theirs, auto ours) {
    return static_cast<int>(theirs) == static_cast<int>(ours);
  };
  static_assert(same(ncclSuccess, kSuccess) &&
                same(ncclInvalidUsage, kInvalidUsage) &&
                same(ncclInProgress, kInProgress));
  static_assert(same(ncclUint8, kUint8) && same(ncclInt32, kInt32) &&
                same(ncclFloat32, kFloat32) && same(ncclBfloat16, kBfloat16));
  static_assert(same(ncclSum, kSum));
  static_assert(sizeof(ncclDataType_t) == sizeof(DataType) &&
                sizeof(ncclResult_t) == sizeof(Result) &&
                sizeof(cudaStream_t) == sizeof(Stream));
  std::printf("checked against nccl.h of NCCL %d.%d.%d\n", NCCL_MAJOR,
              NCCL_MINOR, NCCL_PATCH);
#else
  GTEST_SKIP() << "no nccl.h on the include path";
#endif
}

TEST(NcclApi, AMissingLibraryIsRefusedNamingEveryLibraryTried) {
  const std::vector<std::string> tried = {"/nonexistent/libnccl.so.2",
                                          "libnccl-not-here.so.2"};
  absl::StatusOr<NcclApi> api = loadNcclFrom(tried);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(api.status().message());
  EXPECT_NE(message.find("NCCL is not installed or not on the library path "
                         "(tried /nonexistent/libnccl.so.2: "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("; libnccl-not-here.so.2: "), std::string::npos)
      << message;
  EXPECT_NE(message.find("name its libnccl.so.2 in BRAID_NCCL_LIBRARY"),
            std::string::npos)
      << message;
}

TEST(NcclApi, ALibraryThatIsNotNcclIsRefusedNamingWhatItLacks) {
  const std::vector<std::string> notNccl = {"libm.so.6"};
  absl::StatusOr<NcclApi> api = loadNcclFrom(notNccl);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().message(),
            "libm.so.6 lacks ncclGetVersion, ncclGetUniqueId, "
            "ncclCommInitRank, ncclCommDestroy, ncclCommAbort, "
            "ncclCommGetAsyncError, ncclGetErrorString, ncclAllReduce, "
            "ncclReduceScatter, ncclAllGather, ncclBroadcast, ncclSend, "
            "ncclRecv, ncclGroupStart, ncclGroupEnd; it is not NCCL, or an "
            "NCCL older than 2.7 (send and recv)");
}

TEST(NcclApi, TheOverrideIsTheOnlyLibraryTried) {
  ScopedEnv override("BRAID_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2");
  EXPECT_EQ(ncclLibraryCandidates(),
            std::vector<std::string>{"/opt/nccl/lib/libnccl.so.2"});
}

TEST(NcclApi, PyTorchsWheelIsSearchedAfterTheLoadersPath) {
  // A virtual environment holding what the nvidia-nccl wheel installs.
  const std::string venv =
      absl::StrCat(::testing::TempDir(), "/nccl-venv-", getpid());
  const std::string lib =
      venv + "/lib/python3.11/site-packages/nvidia/nccl/lib";
  std::filesystem::create_directories(lib);
  std::ofstream(lib + "/libnccl.so.2").put('\0');
  ScopedEnv override("BRAID_NCCL_LIBRARY", std::nullopt);
  ScopedEnv env("VIRTUAL_ENV", venv);
  const std::vector<std::string> candidates = ncclLibraryCandidates();
  ASSERT_GE(candidates.size(), 3u);
  EXPECT_EQ(candidates[0], "libnccl.so.2");
  EXPECT_EQ(candidates[1], "libnccl.so");
  EXPECT_EQ(candidates[2], lib + "/libnccl.so.2");
  std::filesystem::remove_all(venv);
}

TEST(NcclApi, LoadsTheNcclFoundHere) {
  absl::StatusOr<const NcclApi *> api = loadNccl();
  if (!api.ok())
    GTEST_SKIP() << api.status().message();
  EXPECT_GE((*api)->version, 21000) << (*api)->versionText();
  EXPECT_FALSE((*api)->libraryName.empty());
  EXPECT_NE((*api)->describe(kInvalidUsage).find("(ncclInvalidUsage = 5)"),
            std::string::npos)
      << (*api)->describe(kInvalidUsage);
  // Rank 0's part of the bootstrap: no GPU needed.
  UniqueId id{};
  EXPECT_EQ((*api)->getUniqueId(&id), kSuccess);
}

} // namespace
} // namespace braid::nccl
