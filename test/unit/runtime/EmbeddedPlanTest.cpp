#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include "runtime/data/WholeFile.h"
#include "runtime/plan/EmbeddedPlan.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = test::scratchDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(EmbeddedPlan, AppendsAndReadsBackThePlan) {
  const std::string runtime = writeFile("fake-runtime", "\x7f"
                                                        "ELF...code");
  const std::string out = test::scratchDir() + "/train_tiny";
  const std::string plan("plan\0bytes", 10);
  ASSERT_TRUE(writeBinaryWithPlan(runtime, plan, out).ok());

  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // The runtime's bytes come first, unchanged.
  std::string bytes = *readWholeFile(out, "test");
  EXPECT_EQ(bytes.substr(0, 11), "\x7f"
                                 "ELF...code");
  EXPECT_EQ(bytes.size(), 11u + 10u + 16u);
  EXPECT_EQ(bytes.substr(bytes.size() - 8), "BRAIDPL1");

  absl::StatusOr<std::optional<std::string>> read = readEmbeddedPlan(out);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, plan);

  // Embedding into a binary that already has a plan replaces it.
  const std::string again = test::scratchDir() + "/train_tiny2";
  ASSERT_TRUE(writeBinaryWithPlan(out, "other", again).ok());
  EXPECT_EQ(**readEmbeddedPlan(again), "other");
  EXPECT_EQ(readWholeFile(again, "test")->size(), 11u + 5u + 16u);
}

TEST(EmbeddedPlan, PlainExecutablesHaveNone) {
  absl::StatusOr<std::optional<std::string>> none =
      readEmbeddedPlan(writeFile("plain", "just a program, no trailer"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  absl::StatusOr<std::optional<std::string>> tiny =
      readEmbeddedPlan(writeFile("tiny", "x"));
  ASSERT_TRUE(tiny.ok());
  EXPECT_FALSE(tiny->has_value());
  // /proc/self/exe of this test: an executable without a plan.
  EXPECT_FALSE(readEmbeddedPlan("/proc/self/exe")->has_value());
}

TEST(EmbeddedPlan, RefusesTruncatedTrailersAndMissingFiles) {
  std::string trailer(16, '\0');
  trailer[0] = 100; // 100 plan bytes announced, none present
  trailer.replace(8, 8, "BRAIDPL1");
  absl::StatusOr<std::optional<std::string>> bad =
      readEmbeddedPlan(writeFile("truncated", "abc" + trailer));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message())
                .find("announces 100 plan bytes, but only 3 bytes precede "
                      "it: the binary is truncated or corrupt"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(readEmbeddedPlan("/nonexistent/exe").status().code(),
            absl::StatusCode::kNotFound);
  absl::Status s =
      writeBinaryWithPlan("/nonexistent/braid-run", "p", "/tmp/never");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  s = writeBinaryWithPlan(writeFile("rt", "x"), "p", "/nonexistent/dir/out");
  EXPECT_NE(std::string(s.message()).find("cannot create"), std::string::npos)
      << s;
}

} // namespace
} // namespace braid
