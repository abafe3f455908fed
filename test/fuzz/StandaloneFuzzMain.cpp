// Runs a libFuzzer entry point over files, so that every fuzz target also
// builds with gcc and replays its seed corpus and past crash inputs as an
// ordinary test. With -DBRAID_FUZZ=ON the targets link libFuzzer instead.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int runFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                         bytes.size());
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto &entry : std::filesystem::directory_iterator(arg)) {
        if (!entry.is_regular_file())
          continue;
        if (runFile(entry.path()) != 0)
          return 1;
        ++files;
      }
    } else {
      if (runFile(arg) != 0)
        return 1;
      ++files;
    }
  }
  std::printf("replayed %d inputs without a crash\n", files);
  return files > 0 ? 0 : 1;
}
