// A launch of the attention kernels as the twin tests describe it
// (AttentionTest.cpp, FlashAttentionTest.cpp): sizes, masks and dropout,
// the kernel parameters they give, and segment ids for document masks.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {

struct AttentionCase {
  int64_t b, s, h, hkv, dh;
  bool causal;
  int64_t prefix; // only with causal
  bool segments;  // segment ids as the last input
  double dropout;
  // head_shard: the launch is one TP rank's slice of the heads (the rank
  // comes with the step values), which moves the dropout draws.
  bool headShard = false;
};

inline KernelParams attentionParams(const AttentionCase &c) {
  KernelParams p;
  p.setInt("num_heads", c.h);
  p.setInt("num_kv_heads", c.hkv);
  p.setInt("causal", c.causal ? 1 : 0);
  p.setInt("prefix", c.prefix);
  p.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(c.dh)));
  p.setFloat("dropout", c.dropout);
  p.setInt("rng_offset", 4);
  if (c.headShard)
    p.setInt("head_shard", 1);
  return p;
}

// Documents of 1 to `longest` tokens, numbered from 1 in each row; rows
// differ.
inline HostTensor segmentIds(int64_t b, int64_t s, int64_t longest) {
  std::vector<int32_t> ids;
  for (int64_t bi = 0; bi < b; ++bi) {
    int32_t id = 0;
    int64_t left = 0;
    for (int64_t i = 0; i < s; ++i) {
      if (left == 0) {
        ++id;
        left = 1 + (i * 5 + bi * 11 + 3) % longest;
      }
      ids.push_back(id);
      --left;
    }
  }
  return i32Tensor({b, s}, ids);
}

} // namespace braid::gpu_test::rows_test
