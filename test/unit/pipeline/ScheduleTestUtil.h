// What the pipeline's unit tests share: a schedule made by a generator and
// a simulation run, each failing the test (and returning an empty value)
// where the library refuses.
#pragma once

#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

#include "passes/pipeline/Generators.h"
#include "passes/pipeline/Simulate.h"

namespace braid::pipeline::test_util {

inline Schedule make(Family family, int64_t ranks, int64_t chunks,
                     int64_t mbs) {
  absl::StatusOr<Schedule> s = makeSchedule(family, ranks, chunks, mbs);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : Schedule{};
}

inline Simulation run(const Schedule &s, const CostModel &c) {
  absl::StatusOr<Simulation> sim = simulate(s, c);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? *std::move(sim) : Simulation{};
}

} // namespace braid::pipeline::test_util
