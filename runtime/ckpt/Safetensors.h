// The safetensors file format: an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus
// an optional "__metadata__" object of strings), then the tensor bytes.
// Offsets are relative to the first byte after the header.
//
// The reader trusts nothing: header length, JSON, dtypes, shapes and offsets
// are all checked, and the tensors must tile the data section exactly (in
// order, no gaps, no overlap), as the format requires.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/ckpt/CheckpointManifest.h"
#include "runtime/io/MappedFile.h"

namespace braid {

// Bytes per element of a safetensors dtype ("F32", "BF16", "I64", ...), or
// 0 for a name the format does not define.
int safetensorsDTypeSize(std::string_view dtype);

// The largest header the reader accepts, as in the reference implementation.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  // The tensor's bytes (row-major, little-endian).
  std::string_view data;
};

class SafetensorsFile {
public:
  // Parses and validates a whole file held in `bytes`; `origin` names it in
  // messages. InvalidArgument naming the problem (and the tensor, where one
  // is at fault) otherwise.
  static absl::StatusOr<SafetensorsFile> parse(std::string bytes,
                                               const std::string &origin);
  // Maps the file at `path` (checkpoints can be far larger than memory
  // would comfortably hold twice) and parses it.
  static absl::StatusOr<SafetensorsFile> read(const std::string &path);
  // Parses a file already mapped.
  static absl::StatusOr<SafetensorsFile>
  fromMapping(std::shared_ptr<const MappedFile> file);

  SafetensorsFile(SafetensorsFile &&) = default;
  SafetensorsFile &operator=(SafetensorsFile &&) = default;

  // In the order of their data.
  const std::vector<SafetensorsTensor> &tensors() const { return tensors_; }
  // Null when there is no tensor called `name`.
  const SafetensorsTensor *find(std::string_view name) const;
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  // Runs `reader`, which reads tensor data, under the mapping's SIGBUS
  // guard (MappedFile::read, whose rules `reader` must follow); in-memory
  // files just run it.
  absl::Status readData(absl::FunctionRef<void()> reader) const;

private:
  SafetensorsFile() = default;
  static absl::StatusOr<SafetensorsFile>
  parseOwned(std::shared_ptr<const void> owner, std::string_view bytes,
             const std::string &origin);

  // Keeps the buffer or mapping the tensors' data views point into alive
  // (and in place when the file object moves).
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const MappedFile> file_; // null when parsed from memory
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (data laid out in the order given) and `metadata` to
// `path`, flushed to disk before returning, and returns the size and CRC-32C
// of what was written. InvalidArgument for a tensor whose data size does not
// match its dtype and shape, or an I/O error naming the path.
absl::StatusOr<ckpt::FileDigest>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsTensor> &tensors,
                 const std::map<std::string, std::string> &metadata);

} // namespace braid
