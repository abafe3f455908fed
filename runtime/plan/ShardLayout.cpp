#include "runtime/plan/ShardLayout.h"

#include <utility>

namespace braid {

ShardLayout::ShardLayout(std::vector<int64_t> wholeShape, int dim,
                         int64_t blocks, int64_t parts, int64_t part) {
  blocks_ = blocks < 1 ? 1 : blocks;
  parts_ = parts < 1 ? 1 : parts;
  part_ = part;
  int64_t inner = 1;
  for (size_t d = 0; d < wholeShape.size(); ++d) {
    if (static_cast<int>(d) < dim)
      outer_ *= wholeShape[d];
    else if (static_cast<int>(d) > dim)
      inner *= wholeShape[d];
  }
  const int64_t rows = dim >= 0 && dim < static_cast<int>(wholeShape.size())
                           ? wholeShape[dim]
                           : 1;
  run_ = rows / (blocks_ * parts_) * inner;
}

ShardLayout ShardLayout::whole(std::vector<int64_t> shape) {
  ShardLayout layout;
  for (int64_t d : shape)
    layout.run_ *= d;
  return layout;
}

ShardLayout ShardLayout::of(const plan::Tensor &t, int64_t parts,
                            int64_t part) {
  if (!t.has_shard())
    return whole({t.shape().begin(), t.shape().end()});
  const plan::Shard &s = t.shard();
  return ShardLayout({s.global_shape().begin(), s.global_shape().end()},
                     static_cast<int>(s.dim()), shardBlocks(s), parts, part);
}

ShardLayout ShardLayout::forPart(int64_t part) const {
  ShardLayout layout = *this;
  layout.part_ = part;
  return layout;
}

int64_t ShardLayout::localIndex(int64_t whole) const {
  if (run_ == 0 || whole < 0 || whole >= wholeNumel())
    return -1;
  const int64_t slot = whole / run_; // (outer, block) * parts + part
  if (slot % parts_ != part_)
    return -1;
  return slot / parts_ * run_ + whole % run_;
}

} // namespace braid
