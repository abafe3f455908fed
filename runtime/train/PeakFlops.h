// The CPU's attainable fp32 rate, the denominator of MFU: OpenBLAS sgemm
// measured on this machine in this run (DESIGN.md, "Performance
// yardsticks").
#pragma once

namespace braid {

struct PeakMeasurement {
  double gflops = 0;
  int size = 0;     // n of the n x n x n products timed
  int products = 0; // how many were timed
};

// Times square sgemm products for about `seconds` and returns the best rate
// seen, in GFLOP/s. Uses OpenBLAS's current thread count.
PeakMeasurement measureSgemmPeak(double seconds);

} // namespace braid
