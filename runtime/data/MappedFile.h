// A read-only memory mapping of a whole file, so that a data set of many GiB
// costs address space rather than a copy.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace braid {

class MappedFile {
public:
  // Maps the regular file at `path`. NotFound / InvalidArgument naming the
  // file's role `what` ("data", "checkpoint"), the path and the system's
  // reason when it cannot. An empty file maps to no bytes.
  static absl::StatusOr<MappedFile> open(const std::string &path,
                                         absl::string_view what);

  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  void release();

  uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace braid
