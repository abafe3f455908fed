//===- FirstFit.cpp - first-fit offsets for buffers live over time --------===//
//
// Why the answer is the scan's: the scan sorts the busy intervals (placed
// buffers alive at the same time) by start and moves a candidate offset,
// from 0, past each one it runs into, stopping at the first it clears. That
// is the lowest offset free of all of them, which depends only on their
// union, and the sets a query collects hold the busy intervals and nothing
// else, merged, so their union is the same. Empty buffers are never
// recorded: the scan puts them at 0, as findOffset does, and a point at 0
// blocks no offset.
//
//===----------------------------------------------------------------------===//
#include "passes/analysis/FirstFit.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace braid {

void IntervalSet::insert(int64_t lo, int64_t hi) {
  auto it = spans_.upper_bound(lo);
  if (it != spans_.begin() && std::prev(it)->second >= lo)
    --it;
  // `it` is now the first interval that touches [lo, hi), if any does.
  while (it != spans_.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = spans_.erase(it);
  }
  spans_.emplace_hint(it, lo, hi);
}

int64_t IntervalSet::conflictEnd(int64_t lo, int64_t size) const {
  // Intervals are disjoint, so the last one starting before the candidate
  // ends is the one that reaches furthest.
  auto it = spans_.lower_bound(lo + size);
  if (it == spans_.begin())
    return -1;
  --it;
  return it->second > lo ? it->second : -1;
}

FirstFitPlacer::FirstFitPlacer(int64_t numSteps) : leaves_(1) {
  while (leaves_ < numSteps)
    leaves_ *= 2;
  nodes_.resize(2 * leaves_);
}

void FirstFitPlacer::insert(size_t node, int64_t lo, int64_t hi,
                            int64_t begin, int64_t end, int64_t offset,
                            int64_t size) {
  if (end < lo || hi < begin)
    return;
  nodes_[node].touched.insert(offset, offset + size);
  if (begin <= lo && hi <= end) {
    nodes_[node].covered.insert(offset, offset + size);
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  insert(2 * node, lo, mid, begin, end, offset, size);
  insert(2 * node + 1, mid + 1, hi, begin, end, offset, size);
}

void FirstFitPlacer::collect(size_t node, int64_t lo, int64_t hi,
                             int64_t begin, int64_t end,
                             std::vector<const IntervalSet *> &sets) const {
  if (end < lo || hi < begin)
    return;
  const Node &n = nodes_[node];
  if (begin <= lo && hi <= end) {
    if (!n.touched.empty())
      sets.push_back(&n.touched);
    return;
  }
  if (!n.covered.empty())
    sets.push_back(&n.covered);
  int64_t mid = lo + (hi - lo) / 2;
  collect(2 * node, lo, mid, begin, end, sets);
  collect(2 * node + 1, mid + 1, hi, begin, end, sets);
}

int64_t FirstFitPlacer::findOffset(int64_t begin, int64_t end,
                                   int64_t size) const {
  assert(0 <= begin && begin <= end && end < leaves_ && "bad time range");
  std::vector<const IntervalSet *> sets;
  collect(1, 0, leaves_ - 1, begin, end, sets);
  // Each move jumps to the end of an interval that every offset in between
  // would also run into, so no free offset is skipped.
  int64_t offset = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const IntervalSet *set : sets) {
      for (int64_t e; (e = set->conflictEnd(offset, size)) >= 0;) {
        offset = e;
        moved = true;
      }
    }
  }
  return offset;
}

void FirstFitPlacer::place(int64_t begin, int64_t end, int64_t offset,
                           int64_t size) {
  assert(0 <= begin && begin <= end && end < leaves_ && "bad time range");
  if (size > 0)
    insert(1, 0, leaves_ - 1, begin, end, offset, size);
}

} // namespace braid
