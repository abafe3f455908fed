#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include "runtime/io/WholeFile.h"
#include "runtime/plan/EmbeddedPlan.h"
#include "runtime/plan/PlanFormat.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = test::scratchDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void putLe(std::string &bytes, size_t at, uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// The smallest ELF file a RuntimeMarker check reads: a 64-byte header and
// three section headers (null, the names, and `section` holding a marker of
// `version`), the names and the marker after them.
std::string fakeRuntime(const std::string &section, uint32_t version) {
  const std::string names = std::string("\0.shstrtab\0", 11) + section + '\0';
  std::string bytes(64 + 3 * 64, '\0');
  bytes.replace(0, 6, "\x7f" "ELF\x02\x01");
  putLe(bytes, 0x28, 64, 8); // e_shoff
  putLe(bytes, 0x3A, 64, 2); // e_shentsize
  putLe(bytes, 0x3C, 3, 2);  // e_shnum
  putLe(bytes, 0x3E, 1, 2);  // e_shstrndx
  const uint64_t namesAt = bytes.size(), markerAt = namesAt + names.size();
  putLe(bytes, 64 + 64 + 0x00, 1, 4); // ".shstrtab"
  putLe(bytes, 64 + 64 + 0x18, namesAt, 8);
  putLe(bytes, 64 + 64 + 0x20, names.size(), 8);
  putLe(bytes, 64 + 128 + 0x00, 11, 4); // `section`
  putLe(bytes, 64 + 128 + 0x18, markerAt, 8);
  putLe(bytes, 64 + 128 + 0x20, sizeof(RuntimeMarker), 8);
  RuntimeMarker marker{"braid-run", version};
  bytes += names;
  bytes.append(reinterpret_cast<const char *>(&marker), sizeof marker);
  return bytes;
}

TEST(EmbeddedPlan, AppendsAndReadsBackThePlan) {
  const std::string image = fakeRuntime(kRuntimeSection, kPlanFormatVersion);
  const std::string runtime = writeFile("fake-runtime", image);
  const std::string out = test::scratchDir() + "/train_tiny";
  const std::string plan("plan\0bytes", 10);
  ASSERT_TRUE(writeBinaryWithPlan(runtime, plan, out).ok());

  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // The runtime's bytes come first, unchanged.
  std::string bytes = *readWholeFile(out, "test");
  EXPECT_EQ(bytes.substr(0, image.size()), image);
  EXPECT_EQ(bytes.size(), image.size() + 10u + 16u);
  EXPECT_EQ(bytes.substr(bytes.size() - 8), "BRAIDPL1");

  absl::StatusOr<std::optional<std::string>> read = readEmbeddedPlan(out);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, plan);

  // Embedding into a binary that already has a plan replaces it.
  const std::string again = test::scratchDir() + "/train_tiny2";
  ASSERT_TRUE(writeBinaryWithPlan(out, "other", again).ok());
  EXPECT_EQ(**readEmbeddedPlan(again), "other");
  EXPECT_EQ(readWholeFile(again, "test")->size(), image.size() + 5u + 16u);
}

// Only a braid-run of this plan format becomes a training binary: a script
// given as --runtime would otherwise run its lines as commands.
TEST(EmbeddedPlan, RefusesRuntimesThatAreNotBraidRun) {
  const std::string out = test::scratchDir() + "/never";
  auto refusal = [&](const std::string &name, const std::string &image) {
    return std::string(
        writeBinaryWithPlan(writeFile(name, image), "p", out).message());
  };
  EXPECT_NE(refusal("script", "echo hello\n").find(
                "is not a 64-bit executable (no ELF header): --runtime takes "
                "the braid-run executable built with this braidc"),
            std::string::npos);
  EXPECT_NE(refusal("other-elf", fakeRuntime(".text", kPlanFormatVersion))
                .find("is an executable but not braid-run (it has no "
                      ".braid_runtime section)"),
            std::string::npos);
  EXPECT_NE(refusal("old-runtime", fakeRuntime(kRuntimeSection, 1))
                .find("is a braid-run of plan format 1 but braidc writes "
                      "format"),
            std::string::npos);
  std::string damaged = fakeRuntime(kRuntimeSection, kPlanFormatVersion);
  putLe(damaged, 0x28, 1u << 30, 8);
  EXPECT_NE(refusal("damaged", damaged).find("damaged ELF section table"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
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
  s = writeBinaryWithPlan(
      writeFile("rt", fakeRuntime(kRuntimeSection, kPlanFormatVersion)), "p",
      "/nonexistent/dir/out");
  EXPECT_NE(std::string(s.message()).find("cannot write '/nonexistent/dir/out'"),
            std::string::npos)
      << s;
}

} // namespace
} // namespace braid
