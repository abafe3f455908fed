#include "runtime/train/PeakFlops.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <cblas.h>

namespace braid {

PeakMeasurement measureSgemmPeak(double seconds) {
  // Large enough for OpenBLAS to reach its steady rate, small enough that
  // several products fit in a fraction of a second on one core.
  constexpr int kN = 512;
  std::vector<float> a(kN * kN), b(kN * kN), c(kN * kN, 0.0f);
  for (int i = 0; i < kN * kN; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.125f;
    b[i] = static_cast<float>(i % 5) * 0.25f;
  }
  auto product = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f,
                a.data(), kN, b.data(), kN, 0.0f, c.data(), kN);
  };
  using Clock = std::chrono::steady_clock;
  product(); // warm-up: thread start, page faults, caches
  PeakMeasurement m;
  m.size = kN;
  const Clock::time_point start = Clock::now();
  double best = 0;
  do {
    Clock::time_point t0 = Clock::now();
    product();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > 0)
      best = std::max(best, 2.0 * kN * kN * kN / dt);
    ++m.products;
  } while (std::chrono::duration<double>(Clock::now() - start).count() <
           seconds);
  m.gflops = best * 1e-9;
  return m;
}

} // namespace braid
