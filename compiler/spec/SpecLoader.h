// Loading a model spec: protobuf text in, a validated spec out, with every
// default filled in explicitly so that later stages never guess.
//
//   absl::StatusOr<spec::ModelSpec> spec =
//       loadSpecFile("models/llama-tiny.pbtxt");
//   if (!spec.ok()) { print spec.status().message(); exit(1); }
//
// docs/spec-reference.md describes every field, default, rule and error.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/spec/spec.pb.h"

namespace braid {

// The largest spec accepted, in bytes. Real specs are a few kilobytes; the
// bound keeps a mistaken path (a dataset, a checkpoint) from being read.
inline constexpr size_t kMaxSpecBytes = 1 << 20;

// Parses, completes and validates the spec text `text`. `displayName` names
// the text in errors (usually its path) and supplies the spec name when the
// text sets none (see defaultSpecName).
//
// On success the spec has every default filled in (SpecDefaults.h). On
// failure the status is InvalidArgument and its message holds every error
// found, one per line, ordered by position, each as
//   <displayName>:<line>:<column>: <field.path>: <what is wrong and what to
//   change>
// Syntax errors (unknown fields and enum names, malformed values, unclosed
// braces) are reported alone: the rules run only on text that parses.
// Never crashes or hangs, whatever the bytes.
absl::StatusOr<spec::ModelSpec> loadSpecText(std::string_view text,
                                             std::string_view displayName);

// Reads the file at `path` and loads it as loadSpecText does, naming it
// `path` in errors. A file that cannot be read is NotFound (no such file),
// PermissionDenied, or InvalidArgument (a directory, a file larger than
// kMaxSpecBytes, a read error), with a message that names the path.
absl::StatusOr<spec::ModelSpec> loadSpecFile(const std::string &path);

} // namespace braid
