// Level-1 profile: wall time per kernel name, summed over every launch the
// executor runs while the profile is attached. Launches on one stream run
// one at a time, so per-kernel times add up to the stream's busy time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

class KernelProfile {
public:
  // Adds one launch of `kernel` that took `seconds`.
  void add(std::string_view kernel, double seconds);
  void clear() { entries_.clear(); }

  struct Entry {
    std::string kernel;
    int64_t launches = 0;
    double seconds = 0;
  };
  // Entries, most time first.
  std::vector<Entry> sorted() const;
  double totalSeconds() const;

  // A table: kernel, launches, total ms, ms per step, share of the total.
  std::string format(int64_t steps) const;

private:
  std::vector<Entry> entries_;
};

}  // namespace braid
