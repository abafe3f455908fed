// Arbitrary bytes as a safetensors file, and its header as JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/ckpt/Json.h"
#include "runtime/ckpt/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace braid;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes, "fuzz");
  if (file.ok()) {
    // Every accepted tensor holds exactly shape x dtype bytes, and reading
    // them all must be safe (the sanitizers check the bounds).
    uint64_t sum = 0;
    for (const SafetensorsTensor &t : file->tensors()) {
      uint64_t expected = safetensorsDTypeSize(t.dtype);
      for (int64_t d : t.shape)
        expected *= static_cast<uint64_t>(d);
      if (t.data.size() != expected)
        std::abort();
      for (char c : t.data)
        sum += static_cast<unsigned char>(c);
    }
    (void)sum;
  }
  if (size > 8)
    (void)parseJson(bytes.substr(8));
  return 0;
}
