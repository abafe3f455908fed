// manifest.json: the last file of a checkpoint, and its proof of integrity.
//
//   {"format_version": 3, "step": 42, "files": [
//     {"name": "config.json", "bytes": 612, "crc32c": "0b1d2e3f"},
//     {"name": "model.safetensors", "bytes": 1234, "crc32c": "e3069283"},
//     {"name": "optimizer.safetensors", "bytes": 5678, "crc32c": "..."}]}
//
// It lists every other file of the checkpoint directory. Its presence means
// the checkpoint is complete; a file whose size or CRC-32C differs from it
// was changed or damaged after the save.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace braid::ckpt {

// The files of a checkpoint directory (Checkpoint.h). The parameters are
// in kModelFile, or in shards that kModelIndexFile names (ShardIndex.h).
inline constexpr char kConfigFile[] = "config.json";
inline constexpr char kModelFile[] = "model.safetensors";
inline constexpr char kModelIndexFile[] = "model.safetensors.index.json";
inline constexpr char kOptimizerFile[] = "optimizer.safetensors";
inline constexpr char kManifestFile[] = "manifest.json";

struct FileDigest {
  std::string name; // file name inside the checkpoint directory
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

struct Manifest {
  int64_t formatVersion = 0;
  int64_t step = 0;
  std::vector<FileDigest> files;
};

// The manifest as JSON text.
std::string formatManifest(const Manifest &manifest);

// Parses manifest.json's text; InvalidArgument naming `path` and the
// problem for anything but a well-formed manifest, whose files are named
// once each by plain names (no directory, not "." or "..").
absl::StatusOr<Manifest> parseManifest(const std::string &text,
                                       const std::string &path);

// The size and CRC-32C of the file at `path`, read through a guarded
// mapping (a file truncated while read is an error, not a crash).
absl::StatusOr<FileDigest> digestFile(const std::string &path);

} // namespace braid::ckpt
