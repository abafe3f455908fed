#include "runtime/ckpt/CheckpointManifest.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Json.h"
#include "runtime/io/MappedFile.h"
#include "runtime/io/Crc32c.h"

namespace braid::ckpt {
namespace {

absl::Status bad(const std::string &path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the checkpoint manifest '", path, "' is damaged: ", what,
      "; the checkpoint cannot be trusted (resume from another one)"));
}

bool readInt(const JsonValue &object, std::string_view key, int64_t *out) {
  const JsonValue *v = object.find(key);
  uint64_t u;
  if (v == nullptr || !v->asUint64(&u) || u > uint64_t{INT64_MAX})
    return false;
  *out = static_cast<int64_t>(u);
  return true;
}

bool isHex8(const std::string &s) {
  return s.size() == 8 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

} // namespace

std::string formatManifest(const Manifest &manifest) {
  std::string text =
      absl::StrCat("{\"format_version\": ", manifest.formatVersion,
                   ", \"step\": ", manifest.step, ", \"files\": [");
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const FileDigest &f = manifest.files[i];
    absl::StrAppend(&text, i ? ",\n  " : "\n  ",
                    "{\"name\": ", jsonQuote(f.name), ", \"bytes\": ", f.bytes,
                    ", \"crc32c\": \"", crc32cHex(f.crc32c), "\"}");
  }
  return text + "]}\n";
}

absl::StatusOr<Manifest> parseManifest(const std::string &text,
                                       const std::string &path) {
  absl::StatusOr<JsonValue> json = parseJson(text);
  if (!json.ok())
    return bad(path, json.status().message());
  if (json->type != JsonValue::Type::kObject)
    return bad(path, "it is not a JSON object");
  Manifest m;
  if (!readInt(*json, "format_version", &m.formatVersion))
    return bad(path, "no valid \"format_version\"");
  if (!readInt(*json, "step", &m.step))
    return bad(path, "no valid \"step\"");
  const JsonValue *files = json->find("files");
  if (files == nullptr || files->type != JsonValue::Type::kArray)
    return bad(path, "no \"files\" list");
  for (const JsonValue &f : files->array) {
    FileDigest d;
    const JsonValue *name = f.find("name");
    const JsonValue *crc = f.find("crc32c");
    int64_t bytes;
    uint32_t value;
    if (f.type != JsonValue::Type::kObject || name == nullptr ||
        name->type != JsonValue::Type::kString || crc == nullptr ||
        crc->type != JsonValue::Type::kString || !isHex8(crc->text) ||
        !absl::SimpleHexAtoi(crc->text, &value) || !readInt(f, "bytes", &bytes))
      return bad(path, "a \"files\" entry is not {\"name\", \"bytes\", "
                       "\"crc32c\"}");
    // Names are read as paths inside the checkpoint directory: nothing
    // may point outside it.
    if (name->text.empty() || name->text == "." || name->text == ".." ||
        name->text.find_first_of(std::string_view("/\0", 2)) !=
            std::string::npos)
      return bad(path, absl::StrCat("a \"files\" entry is called \"",
                                    absl::CEscape(name->text),
                                    "\", not the name of a file in the "
                                    "checkpoint directory"));
    for (const FileDigest &seen : m.files)
      if (seen.name == name->text)
        return bad(path, absl::StrCat("it lists \"", absl::CEscape(name->text),
                                      "\" twice"));
    d.name = name->text;
    d.bytes = static_cast<uint64_t>(bytes);
    d.crc32c = value;
    m.files.push_back(std::move(d));
  }
  return m;
}

absl::StatusOr<FileDigest> digestFile(const std::string &path) {
  absl::StatusOr<MappedFile> file = MappedFile::open(path, "checkpoint");
  if (!file.ok())
    return file.status();
  FileDigest d;
  d.name = std::filesystem::path(path).filename().string();
  d.bytes = file->size();
  if (absl::Status s = file->read([&] {
        d.crc32c = crc32c(std::string_view(
            reinterpret_cast<const char *>(file->data()), file->size()));
      });
      !s.ok())
    return s;
  return d;
}

} // namespace braid::ckpt
