#include "runtime/ckpt/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Json.h"
#include "runtime/io/MappedFile.h"
#include "runtime/io/Crc32c.h"

namespace braid {
namespace {

absl::Status bad(absl::string_view origin, std::string message) {
  return absl::InvalidArgumentError(
      absl::StrCat("the safetensors file '", origin, "' ", message));
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

// Byte size of dtype x shape, or false when it overflows 64 bits.
bool byteSize(std::string_view dtype, const std::vector<int64_t> &shape,
              uint64_t *out) {
  uint64_t n = static_cast<uint64_t>(safetensorsDTypeSize(dtype));
  for (int64_t d : shape) {
    uint64_t dim = static_cast<uint64_t>(d);
    if (dim != 0 && n > std::numeric_limits<uint64_t>::max() / dim)
      return false;
    n *= dim;
  }
  *out = n;
  return true;
}

struct Span {
  uint64_t begin;
  uint64_t end;
  size_t tensor;
};

absl::Status parseEntry(absl::string_view origin, const std::string &name,
                        const JsonValue &value, SafetensorsTensor &tensor,
                        Span &span) {
  std::string where = absl::StrCat("has tensor \"", absl::CEscape(name), "\"");
  if (value.type != JsonValue::Type::kObject)
    return bad(origin, absl::StrCat(where, " described by a non-object"));
  for (const auto &[key, unused] : value.object)
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return bad(origin, absl::StrCat(where, " with unknown field \"",
                                      absl::CEscape(key), "\""));
  const JsonValue *dtype = value.find("dtype");
  const JsonValue *shape = value.find("shape");
  const JsonValue *offsets = value.find("data_offsets");
  if (dtype == nullptr || shape == nullptr || offsets == nullptr)
    return bad(origin, absl::StrCat(where, " without dtype, shape and "
                                           "data_offsets"));
  if (dtype->type != JsonValue::Type::kString ||
      safetensorsDTypeSize(dtype->text) == 0)
    return bad(origin, absl::StrCat(where, " with unknown dtype ",
                                    dtype->type == JsonValue::Type::kString
                                        ? absl::CEscape(dtype->text)
                                        : std::string("(not a string)")));
  tensor.name = name;
  tensor.dtype = dtype->text;
  if (shape->type != JsonValue::Type::kArray)
    return bad(origin, absl::StrCat(where, " whose shape is not an array"));
  for (const JsonValue &dim : shape->array) {
    uint64_t d;
    if (!dim.asUint64(&d) ||
        d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return bad(origin, absl::StrCat(where, " whose shape holds something "
                                             "other than a non-negative "
                                             "integer"));
    tensor.shape.push_back(static_cast<int64_t>(d));
  }
  if (offsets->type != JsonValue::Type::kArray || offsets->array.size() != 2 ||
      !offsets->array[0].asUint64(&span.begin) ||
      !offsets->array[1].asUint64(&span.end))
    return bad(origin, absl::StrCat(where, " whose data_offsets is not a "
                                           "pair of non-negative integers"));
  if (span.begin > span.end)
    return bad(origin, absl::StrCat(where, " whose data_offsets [", span.begin,
                                    ", ", span.end, "] end before they begin"));
  uint64_t expected;
  if (!byteSize(tensor.dtype, tensor.shape, &expected) ||
      expected != span.end - span.begin)
    return bad(origin,
               absl::StrCat(where, " of dtype ", tensor.dtype, " and shape ",
                            shapeString(tensor.shape), " but data_offsets [",
                            span.begin, ", ", span.end, "] span ",
                            span.end - span.begin, " bytes"));
  return absl::OkStatus();
}

absl::Status parseMetadata(absl::string_view origin, const JsonValue &value,
                           std::map<std::string, std::string> &out) {
  if (value.type != JsonValue::Type::kObject)
    return bad(origin, "has a __metadata__ that is not an object");
  for (const auto &[key, v] : value.object) {
    if (v.type != JsonValue::Type::kString)
      return bad(origin,
                 absl::StrCat("has __metadata__ entry \"", absl::CEscape(key),
                              "\" whose value is not a string"));
    out[key] = v.text;
  }
  return absl::OkStatus();
}

} // namespace

int safetensorsDTypeSize(std::string_view dtype) {
  static constexpr std::pair<std::string_view, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8},     {"F64", 8}};
  for (const auto &[name, size] : kSizes)
    if (name == dtype)
      return size;
  return 0;
}

absl::StatusOr<SafetensorsFile>
SafetensorsFile::parse(std::string bytes, const std::string &origin) {
  auto owner = std::make_shared<const std::string>(std::move(bytes));
  std::string_view view(*owner);
  return parseOwned(std::move(owner), view, origin);
}

absl::StatusOr<SafetensorsFile>
SafetensorsFile::parseOwned(std::shared_ptr<const void> owner,
                            std::string_view bytes, const std::string &origin) {
  if (bytes.size() < 8)
    return bad(origin, absl::StrCat("is ", bytes.size(),
                                    " bytes long, too short to hold the "
                                    "8-byte header length"));
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | static_cast<unsigned char>(bytes[i]);
  if (headerLen > kMaxSafetensorsHeaderBytes)
    return bad(origin, absl::StrCat("announces a header of ", headerLen,
                                    " bytes, more than the limit of ",
                                    kMaxSafetensorsHeaderBytes));
  if (headerLen > bytes.size() - 8)
    return bad(origin, absl::StrCat("announces a header of ", headerLen,
                                    " bytes but only ", bytes.size() - 8,
                                    " bytes follow the length"));
  absl::StatusOr<JsonValue> header = parseJson(bytes.substr(8, headerLen));
  if (!header.ok())
    return bad(origin, absl::StrCat("has a header that is not valid JSON: ",
                                    header.status().message()));
  if (header->type != JsonValue::Type::kObject)
    return bad(origin, "has a header that is not a JSON object");

  SafetensorsFile file;
  std::vector<Span> spans;
  for (const auto &[name, value] : header->object) {
    if (name == "__metadata__") {
      if (absl::Status s = parseMetadata(origin, value, file.metadata_);
          !s.ok())
        return s;
      continue;
    }
    SafetensorsTensor tensor;
    Span span{0, 0, file.tensors_.size()};
    if (absl::Status s = parseEntry(origin, name, value, tensor, span); !s.ok())
      return s;
    file.tensors_.push_back(std::move(tensor));
    spans.push_back(span);
  }

  // The tensors must tile the data section: sorted by offset, each begins
  // where the previous ended, and the last ends at the end of the file.
  const uint64_t dataSize = bytes.size() - 8 - headerLen;
  std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expectedBegin = 0;
  for (const Span &span : spans) {
    const std::string &name = file.tensors_[span.tensor].name;
    if (span.end > dataSize)
      return bad(origin,
                 absl::StrCat("has tensor \"", absl::CEscape(name),
                              "\" with data_offsets [", span.begin, ", ",
                              span.end, "] past the end of the data section (",
                              dataSize, " bytes)"));
    if (span.begin < expectedBegin)
      return bad(origin,
                 absl::StrCat("has tensor \"", absl::CEscape(name),
                              "\" whose bytes [", span.begin, ", ", span.end,
                              ") overlap those of another tensor"));
    if (span.begin > expectedBegin)
      return bad(origin, absl::StrCat("has a gap: no tensor covers data "
                                      "bytes [",
                                      expectedBegin, ", ", span.begin, ")"));
    expectedBegin = span.end;
  }
  if (expectedBegin != dataSize)
    return bad(origin, absl::StrCat("has ", dataSize - expectedBegin,
                                    " trailing data bytes that belong to no "
                                    "tensor"));

  file.owner_ = std::move(owner);
  const char *data = bytes.data() + 8 + headerLen;
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(spans.size());
  for (const Span &span : spans) {
    SafetensorsTensor &t = file.tensors_[span.tensor];
    t.data = std::string_view(data + span.begin, span.end - span.begin);
    ordered.push_back(std::move(t));
  }
  file.tensors_ = std::move(ordered);
  return file;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::read(const std::string &path) {
  absl::StatusOr<MappedFile> file = MappedFile::open(path, "checkpoint");
  if (!file.ok())
    return file.status();
  return fromMapping(std::make_shared<const MappedFile>(std::move(*file)));
}

absl::StatusOr<SafetensorsFile>
SafetensorsFile::fromMapping(std::shared_ptr<const MappedFile> file) {
  std::string_view view(reinterpret_cast<const char *>(file->data()),
                        file->size());
  absl::StatusOr<SafetensorsFile> parsed =
      parseOwned(file, view, file->path());
  if (parsed.ok())
    parsed->file_ = std::move(file);
  return parsed;
}

absl::Status SafetensorsFile::readData(absl::FunctionRef<void()> reader) const {
  return readMapped(file_.get(), reader);
}

const SafetensorsTensor *SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsTensor &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

absl::StatusOr<ckpt::FileDigest>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsTensor> &tensors,
                 const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      absl::StrAppend(&header, first ? "" : ",", jsonQuote(key), ":",
                      jsonQuote(value));
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  absl::flat_hash_set<std::string> names;
  for (const SafetensorsTensor &t : tensors) {
    if (!names.insert(t.name).second)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", path, "': two tensors are called \"",
                       absl::CEscape(t.name), "\""));
    uint64_t expected;
    if (safetensorsDTypeSize(t.dtype) == 0 ||
        !byteSize(t.dtype, t.shape, &expected) || expected != t.data.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write tensor \"", absl::CEscape(t.name), "\" to '", path,
          "': dtype ", t.dtype, " and shape ", shapeString(t.shape),
          " do not match its ", t.data.size(), " bytes"));
    if (t.name == "__metadata__")
      return absl::InvalidArgumentError(
          "a tensor cannot be called \"__metadata__\"");
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      absl::StrAppend(&shape, i ? "," : "", t.shape[i]);
    absl::StrAppend(&header, header.size() > 1 ? "," : "", jsonQuote(t.name),
                    ":{\"dtype\":\"", t.dtype, "\",\"shape\":", shape,
                    "],\"data_offsets\":[", offset, ",", offset + t.data.size(),
                    "]}");
    offset += t.data.size();
  }
  header += "}";
  // Pad with spaces so that the data section starts 8-byte aligned.
  while (header.size() % 8 != 0)
    header += ' ';
  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xFF);

  std::unique_ptr<FILE, int (*)(FILE *)> file(std::fopen(path.c_str(), "wb"),
                                              &std::fclose);
  if (!file)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create '", path, "': ", std::strerror(errno)));
  ckpt::FileDigest digest;
  digest.name = std::filesystem::path(path).filename().string();
  auto put = [&](std::string_view bytes) {
    digest.crc32c = crc32c(bytes, digest.crc32c);
    digest.bytes += bytes.size();
    return std::fwrite(bytes.data(), 1, bytes.size(), file.get()) ==
           bytes.size();
  };
  bool ok = put(std::string_view(length, 8)) && put(header);
  for (const SafetensorsTensor &t : tensors)
    ok = ok && put(t.data);
  ok = ok && std::fflush(file.get()) == 0 && ::fsync(fileno(file.get())) == 0;
  int err = errno;
  if (std::fclose(file.release()) != 0 || !ok)
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write '", path, "': ", std::strerror(ok ? errno : err)));
  return digest;
}

} // namespace braid
