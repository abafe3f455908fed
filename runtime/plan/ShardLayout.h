// Where a shard's elements lie in its whole tensor (plan.proto Shard): the
// one mapping between a rank's local element indices and the whole
// tensor's, which parameter initialisation, checkpoint gathers and resume
// scatters all use.
//
// Dimension `dim` of the whole tensor is `blocks` equal consecutive blocks;
// each block is split into P (the axis's group size) equal parts; the rank
// with coordinate k holds part k of every block, the blocks in order. So
// the whole tensor is [outer, blocks, P, piece, inner] (outer the product
// of the dimensions before `dim`, inner of those after it, piece =
// global_shape[dim] / (blocks * P)), and the rank's shard is
// [outer, blocks, piece, inner]: outer * blocks contiguous runs of
// piece * inner elements each.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan/plan.pb.h"

namespace braid {

// A shard's block count: Shard.blocks, 0 meaning 1.
inline int64_t shardBlocks(const plan::Shard &shard) {
  return shard.blocks() == 0 ? 1 : static_cast<int64_t>(shard.blocks());
}

// With dp_rows (ZeRO over a part), the axis whose group cuts the part's
// dimension 0 again: DP for a tensor-parallel part, EDP (the ranks that
// hold the same experts) for an EP share of an MoE layer's experts.
inline plan::MeshAxis dpRowsAxis(const plan::Shard &shard) {
  return shard.axis() == plan::EP ? plan::EDP : plan::DP;
}

// That group's size in `mesh` (at least 1): DP, or DP / EP x CP for EDP.
inline int64_t dpRowsGroupSize(const plan::Mesh &mesh,
                               const plan::Shard &shard) {
  const int64_t dp = mesh.dp() < 1 ? 1 : mesh.dp();
  if (dpRowsAxis(shard) == plan::DP)
    return dp;
  const int64_t ep = mesh.ep() < 1 ? 1 : mesh.ep();
  const int64_t cp = mesh.cp() < 1 ? 1 : mesh.cp();
  return dp / ep < 1 ? 1 : dp / ep * cp;
}

class ShardLayout {
public:
  // The whole tensor of `wholeShape` split along `dim` into `blocks`
  // blocks of `parts` parts each; this layout is of part `part`. The
  // caller has checked that wholeShape[dim] is divisible by blocks * parts
  // (the loader does, PlanTensorChecks.cpp).
  ShardLayout(std::vector<int64_t> wholeShape, int dim, int64_t blocks,
              int64_t parts, int64_t part);
  // A whole tensor of `shape` (one part): local and whole indices agree.
  static ShardLayout whole(std::vector<int64_t> shape);
  // Of plan tensor `t`: its Shard's layout for the rank at coordinate `part`
  // of a group of `parts`, or whole() of its shape when it has no shard.
  static ShardLayout of(const plan::Tensor &t, int64_t parts, int64_t part);

  // The same split, for part `part`.
  ShardLayout forPart(int64_t part) const;

  int64_t parts() const { return parts_; }
  int64_t part() const { return part_; }
  int64_t wholeNumel() const { return outer_ * blocks_ * parts_ * run_; }
  int64_t localNumel() const { return outer_ * blocks_ * run_; }
  // The local tensor as contiguous runs of the whole one: run r is local
  // elements [r * runLength(), (r + 1) * runLength()), which are whole
  // elements [wholeStart(r), wholeStart(r) + runLength()).
  int64_t runs() const { return run_ == 0 ? 0 : outer_ * blocks_; }
  int64_t runLength() const { return run_; }
  int64_t wholeStart(int64_t run) const {
    return (run * parts_ + part_) * run_;
  }

  // The whole tensor's index of local element `local`.
  int64_t wholeIndex(int64_t local) const {
    return wholeStart(local / run_) + local % run_;
  }
  // The local index of whole element `whole`, or -1 when this part does not
  // hold it.
  int64_t localIndex(int64_t whole) const;

private:
  ShardLayout() = default;
  int64_t outer_ = 1; // dimensions before dim
  int64_t blocks_ = 1;
  int64_t parts_ = 1;
  int64_t part_ = 0;
  int64_t run_ = 1; // piece * inner: one contiguous run
};

} // namespace braid
