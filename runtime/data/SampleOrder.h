// Which window of the token file each sample of a run reads
// (docs/numerics.md, "Data order"). Sample j reads window j mod W in
// sequential order, or perm_e[j mod W] with e = j / W when shuffling, where
// perm_e is the seeded Fisher-Yates permutation of epoch e. Being a pure
// function of (seed, j), the order resumes exactly from a sample count.
#pragma once

#include <cstdint>
#include <vector>

namespace braid {

class SampleOrder {
public:
  // `numWindows` > 0.
  SampleOrder(int64_t numWindows, uint64_t seed, bool shuffle);

  // The window read by sample `sample` (>= 0). Keeps the permutation of the
  // latest epoch asked for, so consecutive samples cost O(1).
  int64_t window(int64_t sample);

  // The permutation of 0..numWindows-1 used in `epoch`.
  static std::vector<int64_t> permutation(int64_t numWindows, uint64_t seed,
                                          int64_t epoch);

private:
  int64_t numWindows_;
  uint64_t seed_;
  bool shuffle_;
  int64_t cachedEpoch_ = -1;
  std::vector<int64_t> perm_;
};

} // namespace braid
