#include <cstdint>
#include <string>

#include "runtime/device/cpu/CpuArena.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

TEST(CpuArena, IsAlignedAndZeroed) {
  absl::StatusOr<CpuArena> arena = CpuArena::create(10000);
  ASSERT_TRUE(arena.ok()) << arena.status();
  ASSERT_NE(arena->data(), nullptr);
  EXPECT_EQ(arena->size(), 10000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena->data()) % 64, 0u);
  for (uint64_t i = 0; i < arena->size(); ++i)
    ASSERT_EQ(arena->data()[i], 0) << "byte " << i;
  arena->data()[9999] = 7; // the whole range is writable

  CpuArena moved = std::move(*arena);
  EXPECT_EQ(arena->data(), nullptr);
  EXPECT_EQ(moved.data()[9999], 7);
}

TEST(CpuArena, EmptyArenaHoldsNothing) {
  absl::StatusOr<CpuArena> arena = CpuArena::create(0);
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ(arena->data(), nullptr);
  EXPECT_EQ(arena->size(), 0u);
}

TEST(CpuArena, ImpossibleSizeIsAClearError) {
  absl::StatusOr<CpuArena> arena = CpuArena::create(uint64_t{1} << 62);
  ASSERT_FALSE(arena.ok());
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(arena.status().message())
                .find("cannot allocate the arena: 4611686018427387904 bytes "
                      "(4294967296.00 GiB) were requested"),
            std::string::npos)
      << arena.status();
}

} // namespace
} // namespace braid
