// CRC-32C (Castagnoli), the checksum plans and checkpoints carry so that a
// flipped byte is refused instead of trained on. The same function as
// iSCSI's and ext4's: crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace braid {

// The CRC-32C of `bytes`, continuing from `crc` (the value returned for the
// bytes before them; 0 to start). Uses the SSE4.2 instruction where the CPU
// has it, a table otherwise; both give the same value.
uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);

// The table-driven path alone, for tests that compare it with crc32c().
uint32_t crc32cPortable(std::string_view bytes, uint32_t crc = 0);

// "e3069283": eight lower-case hex digits.
std::string crc32cHex(uint32_t crc);

} // namespace braid
