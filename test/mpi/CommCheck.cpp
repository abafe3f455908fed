// braid-comm-check: the communicators of a multi-rank run, exercised under
// mpirun by the lit tests beside it.
//
//   braid-comm-check collectives TP DP   every collective on both axes
//   braid-comm-check hang TIMEOUT_MS     rank 1 skips an all-reduce
//   braid-comm-check stopped TIMEOUT_MS  rank 1 enters one, then stops
//   braid-comm-check unmatched TIMEOUT_MS rank 0 receives what rank 1
//                                        never sends
//   braid-comm-check time CALLS COUNT    microseconds per all-reduce
//   braid-comm-check race                a buffer written while it is
//                                        all-reduced (ThreadSanitizer
//                                        must report it: test/tsan)
//
// Each rank checks its own results; rank 0 prints one summary line, so the
// output does not depend on how the ranks' lines interleave.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/comm/Ranks.h"

namespace braid {
namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "braid-comm-check: %s\n", what.c_str());
  }
}

void expectOk(const absl::Status &s, const std::string &what) {
  expect(s.ok(), absl::StrCat(what, ": ", s.ToString()));
}

// Every collective of `comm`, on values that name the rank.
void checkAxis(Communicator &comm) {
  const int r = comm.rank(), n = comm.size();
  const std::string &g = comm.name();
  // all-reduce: sum over ranks of (rank + 1) * (i + 1).
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((r + 1) * (i + 1));
  expectOk(comm.allReduceSum(v.data(), v.size(), DType::kF32),
           g + " all-reduce");
  const float ranksSum = n * (n + 1) / 2.0f;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != ranksSum * (i + 1)) {
      expect(false, absl::StrCat(g, " all-reduce: element ", i, " is ", v[i]));
      break;
    }
  // reduce-scatter: rank r gets the sum of every rank's block r.
  std::vector<int32_t> in(3 * n), out(3);
  for (int k = 0; k < 3 * n; ++k)
    in[k] = (r + 1) * k;
  expectOk(comm.reduceScatterSum(in.data(), out.data(), 3, DType::kI32),
           g + " reduce-scatter");
  for (int k = 0; k < 3; ++k)
    expect(out[k] == static_cast<int32_t>(ranksSum) * (3 * r + k),
           absl::StrCat(g, " reduce-scatter: element ", k, " is ", out[k]));
  // all-gather of bf16 bit patterns.
  std::vector<uint16_t> mine = {static_cast<uint16_t>(r), 7}, all(2 * n);
  expectOk(comm.allGather(mine.data(), all.data(), 2, DType::kBF16),
           g + " all-gather");
  for (int k = 0; k < n; ++k)
    expect(all[2 * k] == k && all[2 * k + 1] == 7,
           absl::StrCat(g, " all-gather: block ", k));
  // broadcast from the last rank.
  int64_t word = r == n - 1 ? 424242 : -1;
  expectOk(comm.broadcast(&word, sizeof word, n - 1), g + " broadcast");
  expect(word == 424242, g + " broadcast");
  // a ring of sends: even ranks send first, odd ranks receive first.
  if (n > 1) {
    int32_t got = -1, sent = 100 + r;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      expectOk(comm.send(&sent, sizeof sent, next, 5), g + " send");
      expectOk(comm.recv(&got, sizeof got, prev, 5), g + " recv");
    } else {
      expectOk(comm.recv(&got, sizeof got, prev, 5), g + " recv");
      expectOk(comm.send(&sent, sizeof sent, next, 5), g + " send");
    }
    expect(got == 100 + prev, absl::StrCat(g, " recv got ", got));
  }
}

int collectives(int64_t tp, int64_t dp) {
  MeshShape mesh;
  mesh.sizes = {tp, 1, 1, dp};
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(mesh, std::chrono::seconds(60));
  if (!ranks.ok()) {
    std::fprintf(stderr, "braid-comm-check: %s\n",
                 std::string(ranks.status().message()).c_str());
    return 1;
  }
  for (MeshAxis a : kMeshAxes)
    checkAxis((*ranks)->axis(a));
  // Everyone's verdict, gathered over the whole mesh through dp and tp.
  int32_t bad = failures;
  expectOk((*ranks)->axis(MeshAxis::kTP).allReduceSum(&bad, 1, DType::kI32),
           "verdict");
  expectOk((*ranks)->axis(MeshAxis::kDP).allReduceSum(&bad, 1, DType::kI32),
           "verdict");
  if ((*ranks)->rank() == 0) {
    std::printf("rank 0 of %lld: %s\n",
                static_cast<long long>((*ranks)->worldSize()),
                (*ranks)->axis(MeshAxis::kDP).name().c_str());
    std::printf("collectives on %s: %s\n", mesh.describe().c_str(),
                bad == 0 ? "ok" : "FAILED");
  }
  return bad == 0 ? 0 : 1;
}

// The ranks of a data-parallel mesh of `dp`, or null after saying why.
std::unique_ptr<Ranks> joinDP(int64_t dp, std::chrono::milliseconds timeout) {
  MeshShape mesh;
  mesh.sizes = {1, 1, 1, dp};
  absl::StatusOr<std::unique_ptr<Ranks>> ranks = Ranks::join(mesh, timeout);
  if (!ranks.ok()) {
    std::fprintf(stderr, "braid-comm-check: %s\n",
                 std::string(ranks.status().message()).c_str());
    return nullptr;
  }
  return std::move(*ranks);
}

// Rank 0 all-reduces `count` floats and reports its watchdog's verdict.
[[noreturn]] void waitOnRank0(const Ranks &ranks, size_t count) {
  std::vector<float> x(count, 1.0f);
  absl::Status s =
      ranks.axis(MeshAxis::kDP).allReduceSum(x.data(), count, DType::kF32);
  std::fprintf(stderr, "braid-comm-check: %s\n", s.ToString().c_str());
  std::fflush(stderr);
  ranks.abortAll(3);
}

int hang(int64_t timeoutMs) {
  std::unique_ptr<Ranks> ranks =
      joinDP(2, std::chrono::milliseconds(timeoutMs));
  if (!ranks)
    return 1;
  if (ranks->rank() == 1) {
    // Never joins; rank 0's watchdog ends the job.
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  waitOnRank0(*ranks, 1);
}

// Rank 0 receives from rank 1, which never sends: the watchdog names the
// peer.
int unmatched(int64_t timeoutMs) {
  std::unique_ptr<Ranks> ranks =
      joinDP(2, std::chrono::milliseconds(timeoutMs));
  if (!ranks)
    return 1;
  if (ranks->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  float x = 0;
  absl::Status s = ranks->axis(MeshAxis::kDP).recv(&x, sizeof x, 1, 0);
  std::fprintf(stderr, "braid-comm-check: %s\n", s.ToString().c_str());
  std::fflush(stderr);
  ranks->abortAll(3);
}

// Rank 1 enters an all-reduce too large for MPI to finish without it
// (4 MiB), then stops (SIGSTOP) before rank 0 joins: rank 1 has reached the
// collective, but no longer takes part in it. A first, small all-reduce
// starts both ranks' clocks together.
int stopped(int64_t timeoutMs) {
  std::unique_ptr<Ranks> ranks =
      joinDP(2, std::chrono::milliseconds(timeoutMs));
  if (!ranks)
    return 1;
  constexpr size_t kCount = size_t{1} << 20;
  std::vector<float> x(kCount, 1.0f);
  Communicator &dp = ranks->axis(MeshAxis::kDP);
  if (absl::Status s = dp.allReduceSum(x.data(), 1, DType::kF32); !s.ok()) {
    std::fprintf(stderr, "braid-comm-check: %s\n", s.ToString().c_str());
    return 1;
  }
  if (ranks->rank() == 1) {
    std::thread stopper([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      ::kill(::getpid(), SIGSTOP);
    });
    absl::Status s = dp.allReduceSum(x.data(), kCount, DType::kF32);
    stopper.join();
    return s.ok() ? 0 : 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  waitOnRank0(*ranks, kCount);
}

// A thread all-reduces a buffer that the main thread writes meanwhile,
// with nothing ordering the two: the race a missing event would make
// between a kernel and the communication stream. Built with
// ThreadSanitizer, every rank must report it, through the accesses
// MpiCommunicator reports for MPI.
int race() {
  std::unique_ptr<Ranks> ranks = joinDP(2, std::chrono::seconds(60));
  if (!ranks)
    return 1;
  std::vector<float> x(1024, 1.0f);
  std::thread comm([&] {
    (void)ranks->axis(MeshAxis::kDP)
        .allReduceSum(x.data(), x.size(), DType::kF32);
  });
  x[0] = 2.0f;
  comm.join();
  return 0;
}

// `calls` all-reduces of `count` floats over the ranks started, after 100
// to warm up; rank 0 prints the mean time per call.
int timeCalls(int64_t calls, int64_t count) {
  const std::optional<int64_t> world = launcherWorldSize();
  std::unique_ptr<Ranks> ranks =
      joinDP(world.value_or(1), std::chrono::seconds(60));
  if (!ranks)
    return 1;
  Communicator &dp = ranks->axis(MeshAxis::kDP);
  std::vector<float> x(count, 1.0f);
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  for (int64_t i = -100; i < calls; ++i) {
    if (i == 0)
      start = Clock::now();
    if (absl::Status s = dp.allReduceSum(x.data(), x.size(), DType::kF32);
        !s.ok()) {
      std::fprintf(stderr, "braid-comm-check: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const double us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  if (ranks->rank() == 0)
    std::printf("all-reduce of %lld f32 over %d ranks: %.2f us per call "
                "(%lld calls)\n",
                static_cast<long long>(count), dp.size(), us / calls,
                static_cast<long long>(calls));
  return 0;
}

} // namespace
} // namespace braid

int main(int argc, char **argv) {
  int64_t a = 0, b = 0;
  if (argc == 4 && std::strcmp(argv[1], "collectives") == 0 &&
      absl::SimpleAtoi(argv[2], &a) && absl::SimpleAtoi(argv[3], &b))
    return braid::collectives(a, b);
  if (argc == 3 && std::strcmp(argv[1], "hang") == 0 &&
      absl::SimpleAtoi(argv[2], &a))
    return braid::hang(a);
  if (argc == 3 && std::strcmp(argv[1], "stopped") == 0 &&
      absl::SimpleAtoi(argv[2], &a))
    return braid::stopped(a);
  if (argc == 3 && std::strcmp(argv[1], "unmatched") == 0 &&
      absl::SimpleAtoi(argv[2], &a))
    return braid::unmatched(a);
  if (argc == 2 && std::strcmp(argv[1], "race") == 0)
    return braid::race();
  if (argc == 4 && std::strcmp(argv[1], "time") == 0 &&
      absl::SimpleAtoi(argv[2], &a) && absl::SimpleAtoi(argv[3], &b) && a > 0 &&
      b > 0)
    return braid::timeCalls(a, b);
  std::fprintf(stderr,
               "usage: braid-comm-check collectives TP DP | hang "
               "TIMEOUT_MS | stopped TIMEOUT_MS | unmatched TIMEOUT_MS | time "
               "CALLS COUNT | race\n");
  return 2;
}
