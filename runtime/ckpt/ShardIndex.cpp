#include "runtime/ckpt/ShardIndex.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/Json.h"

namespace braid::ckpt {
namespace {

absl::Status bad(const std::string &path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the checkpoint index '", path, "' is malformed: ", what));
}

} // namespace

std::string shardFileName(size_t shard, size_t count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", shard, count);
}

std::vector<std::vector<size_t>>
splitIntoShards(const std::vector<uint64_t> &bytes, uint64_t maxShardBytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t currentBytes = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] > maxShardBytes) {
      shards.push_back({i});
      continue;
    }
    if (bytes[i] > maxShardBytes - currentBytes) {
      shards.push_back(std::move(current));
      current.clear();
      currentBytes = 0;
    }
    current.push_back(i);
    currentBytes += bytes[i];
  }
  if (!current.empty())
    shards.push_back(std::move(current));
  return shards;
}

std::string formatShardIndex(const ShardIndex &index) {
  std::vector<std::pair<std::string, std::string>> map = index.weightMap;
  std::sort(map.begin(), map.end());
  std::string text = absl::StrCat(
      "{\n  \"metadata\": {\n    \"total_size\": ", index.totalSize,
      "\n  },\n  \"weight_map\": {");
  for (size_t i = 0; i < map.size(); ++i)
    absl::StrAppend(&text, i ? "," : "", "\n    ", jsonQuote(map[i].first),
                    ": ", jsonQuote(map[i].second));
  return text + (map.empty() ? "}\n}\n" : "\n  }\n}\n");
}

absl::StatusOr<ShardIndex> parseShardIndex(std::string_view text,
                                           const std::string &path) {
  absl::StatusOr<JsonValue> json = parseJson(text);
  if (!json.ok())
    return bad(path, json.status().message());
  if (json->type != JsonValue::Type::kObject)
    return bad(path, "it is not a JSON object");
  ShardIndex index;
  const JsonValue *metadata = json->find("metadata");
  const JsonValue *total =
      metadata != nullptr ? metadata->find("total_size") : nullptr;
  if (metadata == nullptr || metadata->type != JsonValue::Type::kObject ||
      total == nullptr || !total->asUint64(&index.totalSize))
    return bad(path, "it has no \"metadata\": {\"total_size\": BYTES}");
  const JsonValue *map = json->find("weight_map");
  if (map == nullptr || map->type != JsonValue::Type::kObject)
    return bad(path, "it has no \"weight_map\" object");
  // The JSON reader refuses a key given twice, so each tensor is named once.
  for (const auto &[tensor, file] : map->object) {
    if (file.type != JsonValue::Type::kString)
      return bad(path, absl::StrCat("\"weight_map\" gives tensor \"",
                                    absl::CEscape(tensor),
                                    "\" something other than a file name"));
    index.weightMap.emplace_back(tensor, file.text);
  }
  return index;
}

} // namespace braid::ckpt
