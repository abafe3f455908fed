// A read-only memory mapping of a whole file, so that a data set of many GiB
// costs address space rather than a copy.
//
// A mapped file can change under the process: truncated (a read past the
// new end raises SIGBUS) or rewritten in place. read() turns such a SIGBUS
// into an error naming the file, and checkUnchanged() notices a rewrite, so
// neither kills a run without a word nor trains on bytes that were never
// validated.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include "absl/functional/function_ref.h"
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
  const std::string &path() const { return path_; }

  // Runs `reader`, which reads this mapping. A SIGBUS raised by one of its
  // reads (the file was truncated) abandons `reader` and returns an error
  // naming the file. `reader` must own nothing that needs destroying, since
  // it is left by a jump: plain loops and memcpy only.
  absl::Status read(absl::FunctionRef<void()> reader) const;

  // An error naming the file when its size or modification time is no
  // longer what it was when mapped: it was truncated or rewritten in place.
  // A file replaced by a rename is not changed: the mapping keeps the old
  // one.
  absl::Status checkUnchanged() const;

private:
  void release();

  uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
  timespec mtime_{};
  std::string path_;
  std::string what_;
};

// MappedFile::read on `file`, or `reader` run as it is when there is no
// mapping (bytes held in memory cannot vanish).
absl::Status readMapped(const MappedFile *file,
                        absl::FunctionRef<void()> reader);

} // namespace braid
