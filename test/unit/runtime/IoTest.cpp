// The file helpers every output and loader relies on: CRC-32C, writing
// through a temporary file, and telling inputs from outputs.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/io/WholeFile.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/Crc32c.h"
#include "runtime/io/FileIdentity.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

TEST(Crc32c, MatchesTheStandardCheckValues) {
  // RFC 3720 (iSCSI) B.4 and the usual "123456789" check value.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32cHex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32cHex(0x1u), "00000001");
}

TEST(Crc32c, HardwareAndTablePathsAgreeAndContinue) {
  std::string bytes;
  for (int i = 0; i < 10007; ++i)
    bytes.push_back(static_cast<char>((i * 7919) >> 3));
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9},
                   size_t{4096}, bytes.size()}) {
    std::string_view part(bytes.data(), n);
    EXPECT_EQ(crc32c(part), crc32cPortable(part)) << n;
  }
  // Checksumming in pieces gives the checksum of the whole.
  const uint32_t whole = crc32c(bytes);
  EXPECT_EQ(crc32c(std::string_view(bytes).substr(333),
                   crc32c(std::string_view(bytes).substr(0, 333))),
            whole);
}

TEST(AtomicFile, ReplacesOrKeepsThePreviousFile) {
  const std::string dir = test::freshDir("atomic");
  const std::string path = dir + "/out.bin";
  ASSERT_TRUE(writeFileAtomically(path, "first").ok());
  EXPECT_EQ(*readWholeFile(path, "test"), "first");
  const std::string_view pieces[] = {"sec", "ond"};
  ASSERT_TRUE(writeFileAtomically(path, pieces, 0755).ok());
  EXPECT_EQ(*readWholeFile(path, "test"), "second");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0100, 0100u);
  // Nothing but the file is left behind.
  int entries = 0;
  for (const auto &e : fs::directory_iterator(dir))
    entries += e.path().filename() == "out.bin" ? 1 : 100;
  EXPECT_EQ(entries, 1);

  absl::Status s = writeFileAtomically(dir + "/missing/x", "y");
  EXPECT_NE(std::string(s.message())
                .find("cannot write '" + dir + "/missing/x': No such file"),
            std::string::npos)
      << s;
  EXPECT_FALSE(writeFileAtomically(dir, "y").ok()); // a directory
  // Special files are written in place: /dev/null stays a device.
  EXPECT_TRUE(writeFileAtomically("/dev/null", "discarded").ok());
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// A full disk (here a file-size limit) fails the write with a message
// naming the path, and the previous contents survive.
TEST(AtomicFile, AWriteErrorLeavesThePreviousFileIntact) {
  const std::string dir = test::freshDir("atomic-full");
  const std::string path = dir + "/plan.bin";
  ASSERT_TRUE(writeFileAtomically(path, "the good old plan").ok());
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    absl::Status s = writeFileAtomically(path, std::string(100000, 'z'));
    const bool named =
        std::string(s.message()).find("cannot write '" + path + "'") !=
        std::string::npos;
    std::_Exit(!s.ok() && named ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(*readWholeFile(path, "test"), "the good old plan");
  for (const auto &e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "plan.bin");
}

TEST(FileIdentity, RefusesAnOutputThatIsAnInput) {
  const std::string dir = test::freshDir("identity");
  const std::string data = dir + "/data.txt";
  std::ofstream(data) << "tokens";
  fs::create_hard_link(data, dir + "/link.txt");
  const std::vector<NamedInput> inputs = {{"the data file (--data)", data}};
  EXPECT_TRUE(refuseInputAsOutput("--log", dir + "/log.jsonl", inputs).ok());
  absl::Status s = refuseInputAsOutput("--log", dir + "/./data.txt", inputs);
  EXPECT_EQ(std::string(s.message()),
            "--log '" + dir + "/./data.txt' is the data file (--data) '" +
                data +
                "': writing it would destroy it; choose another path "
                "for --log");
  // A hard link is the same file under another name.
  EXPECT_FALSE(refuseInputAsOutput("--log", dir + "/link.txt", inputs).ok());
  EXPECT_TRUE(sameFile(data, dir + "/link.txt"));
  EXPECT_FALSE(sameFile(data, dir + "/none"));
}

} // namespace
} // namespace braid
