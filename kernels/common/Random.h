// Counter-based random numbers shared by weight initialisation, dropout and
// data shuffling. Every draw is a pure function of (seed, purpose, index), so
// a run is reproducible, resumable mid-way, and identical whatever the thread
// count or device. test/numerics/torch_reference.py re-implements these
// functions bit for bit; keep the two in step (docs/numerics.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

// The stream functions and the dropout key also compile for CUDA devices,
// so that GPU dropout masks are the CPU's, bit for bit. Initialisation and
// shuffling run on the host only.
#include "kernels/common/HostDevice.h"

namespace braid::rng {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The splitmix64 finaliser.
BRAID_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The n-th output (n >= 0) of the splitmix64 sequence whose state starts at
// key.
BRAID_HOST_DEVICE inline uint64_t draw(uint64_t key, uint64_t n) {
  return mix64(key + (n + 1) * kGolden);
}

// A new key for a sub-stream tagged `tag` of stream `key`.
BRAID_HOST_DEVICE inline uint64_t derive(uint64_t key, uint64_t tag) {
  return mix64(key ^ mix64(tag + kGolden));
}

inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// Uniform in [0, 1) with 24 random bits: exact in fp32.
BRAID_HOST_DEVICE inline float uniform24(uint64_t key, uint64_t n) {
  return static_cast<float>(draw(key, n) >> 40) * (1.0f / 16777216.0f);
}

// The key of a parameter's initial values: independent of parameter order.
inline uint64_t parameterKey(uint64_t seed, std::string_view name) {
  return mix64(seed ^ fnv1a64(name));
}

// Element i of a standard normal stream (Box-Muller on draws 2i and 2i+1),
// computed in double and rounded once.
inline double normal(uint64_t key, uint64_t i) {
  const double kTwoPi = 6.283185307179586476925286766559;
  double u1 = (static_cast<double>(draw(key, 2 * i) >> 11) + 1.0) *
              (1.0 / 9007199254740992.0); // (0, 1]
  double u2 = static_cast<double>(draw(key, 2 * i + 1) >> 11) *
              (1.0 / 9007199254740992.0); // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

// The key of the dropout mask of one dropout site in one micro-batch.
BRAID_HOST_DEVICE inline uint64_t dropoutKey(uint64_t seed, int64_t rngOffset,
                                             int64_t step, int64_t microBatch) {
  uint64_t k = derive(seed, 0x44524F50ull /* "DROP" */);
  k = derive(k, static_cast<uint64_t>(rngOffset));
  k = derive(k, static_cast<uint64_t>(step));
  return derive(k, static_cast<uint64_t>(microBatch));
}

// The key of the sample permutation of one data epoch.
inline uint64_t shuffleKey(uint64_t seed, int64_t epoch) {
  uint64_t k = derive(seed, 0x53485546ull /* "SHUF" */);
  return derive(k, static_cast<uint64_t>(epoch));
}

} // namespace braid::rng
