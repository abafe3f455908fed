// Numbers for people: byte sizes, rates and durations as they appear in the
// progress line and the memory report.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

// "512 B", "1.50 KiB", "23.4 MiB", "7.25 GiB" (three significant digits).
std::string humanBytes(uint64_t bytes);
// "950", "41.2k", "3.10M", "1.25G" (three significant digits).
std::string humanCount(double value);
// "0:01:47", "12:00:05"; "-:--:--" when not finite or negative.
std::string humanDuration(double seconds);

} // namespace braid
