// Sharded parameters, as transformers writes a model larger than its
// max_shard_size: model-00001-of-0000N.safetensors ... and
// model.safetensors.index.json,
//
//   {
//     "metadata": {
//       "total_size": 1234
//     },
//     "weight_map": {
//       "lm_head.weight": "model-00002-of-00002.safetensors",
//       ...
//     }
//   }
//
// total_size is the bytes of all tensors (not of the files); weight_map names
// the shard of every tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace braid::ckpt {

// transformers' default max_shard_size, "5GB".
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// "model-00002-of-00005.safetensors" for shard 2 (1-based) of 5.
std::string shardFileName(size_t shard, size_t count);

// Splits tensors of `bytes` each, in order, into shards of at most
// `maxShardBytes` as huggingface_hub's split_state_dict_into_shards does: a
// tensor joins the current shard unless that would take it past the limit,
// in which case the next shard starts; a tensor larger than the limit gets a
// shard of its own at once. Returns the tensor indices of each shard (one
// shard when everything fits; none for no tensors).
std::vector<std::vector<size_t>>
splitIntoShards(const std::vector<uint64_t> &bytes, uint64_t maxShardBytes);

struct ShardIndex {
  uint64_t totalSize = 0;
  // Tensor name -> shard file name, each tensor once.
  std::vector<std::pair<std::string, std::string>> weightMap;
};

// The index as json.dumps(index, indent=2, sort_keys=True) writes it.
std::string formatShardIndex(const ShardIndex &index);

// Parses an index's text. InvalidArgument naming `path` for anything but an
// object with "metadata": {"total_size": a non-negative integer} and
// "weight_map": {tensor: file name, ...} (other members are ignored, as
// transformers ignores them).
absl::StatusOr<ShardIndex> parseShardIndex(std::string_view text,
                                           const std::string &path);

} // namespace braid::ckpt
