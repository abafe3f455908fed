#include "runtime/io/Crc32c.h"

#include <array>
#include <cstring>

#include "absl/strings/str_format.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace braid {
namespace {

// Reflected polynomial 0x1EDC6F41.
constexpr uint32_t kPolynomial = 0x82F63B78u;

// Slicing-by-8 tables: kTables[k][b] is the CRC of byte b followed by k
// zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables makeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i)
      c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (int k = 1; k < 8; ++k)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}

uint32_t crcTable(const unsigned char *p, size_t n, uint32_t c) {
  static const Tables t = makeTables();
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^
        t[4][lo >> 24] ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^
        t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; ++p, --n)
    c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crcHardware(const unsigned char *p,
                                                       size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = static_cast<uint32_t>(c64);
  for (; n > 0; ++p, --n)
    c = _mm_crc32_u8(c, *p);
  return c;
}

bool hasHardwareCrc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

} // namespace

uint32_t crc32c(std::string_view bytes, uint32_t crc) {
  const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (hasHardwareCrc())
    return ~crcHardware(p, bytes.size(), c);
#endif
  return ~crcTable(p, bytes.size(), c);
}

uint32_t crc32cPortable(std::string_view bytes, uint32_t crc) {
  return ~crcTable(reinterpret_cast<const unsigned char *>(bytes.data()),
                   bytes.size(), ~crc);
}

std::string crc32cHex(uint32_t crc) { return absl::StrFormat("%08x", crc); }

} // namespace braid
