//===- FirstFit.h - first-fit offsets for buffers live over time -*- C++ -*-===//
//
// The memory planner places buffers one at a time, each at the lowest offset
// where it meets no placed buffer that is alive at the same time. Asked
// naively, that question looks at every placed buffer, which made planning
// quadratic in the number of layers. This structure gives the same answer
// from O(log T) merged interval sets (T time steps), searched in
// logarithmic time for each interval the answer has to step over.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace braid {

// Disjoint half-open address intervals; touching or overlapping inserts
// merge, which is harmless because a fit only cares about the union.
class IntervalSet {
public:
  void insert(int64_t lo, int64_t hi);
  // The end of the interval that [lo, lo + size) runs into, or -1 if none.
  int64_t conflictEnd(int64_t lo, int64_t size) const;
  bool empty() const { return spans_.empty(); }

private:
  std::map<int64_t, int64_t> spans_; // start -> end
};

// Buffers are rectangles: a closed range of time steps (launch indices) by a
// half-open address range. findOffset returns what scanning every placed
// buffer would: the lowest offset >= 0 at which [offset, offset + size)
// meets the address range of no placed buffer whose time range overlaps
// [begin, end].
class FirstFitPlacer {
public:
  // Time steps run from 0 to numSteps - 1.
  explicit FirstFitPlacer(int64_t numSteps);

  int64_t findOffset(int64_t begin, int64_t end, int64_t size) const;
  // Records a buffer at the offset findOffset gave it.
  void place(int64_t begin, int64_t end, int64_t offset, int64_t size);

private:
  // A segment tree over time. A buffer is recorded in `covered` of the
  // O(log T) nodes whose ranges tile its time range, and in `touched` of
  // those nodes and of every node above them. A query tiles its range the
  // same way. Two ranges overlap exactly when a tile of one lies on or below
  // a tile of the other, so a query reads `touched` of its own tiles and
  // `covered` of the nodes above them.
  struct Node {
    IntervalSet covered; // buffers alive over the node's whole range
    IntervalSet touched; // buffers recorded at the node or below it
  };

  void insert(size_t node, int64_t lo, int64_t hi, int64_t begin, int64_t end,
              int64_t offset, int64_t size);
  void collect(size_t node, int64_t lo, int64_t hi, int64_t begin,
               int64_t end, std::vector<const IntervalSet *> &sets) const;

  int64_t leaves_;
  std::vector<Node> nodes_;
};

} // namespace braid
