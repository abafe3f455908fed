// GPipe, 1F1B and interleaved 1F1B, in Megatron-Core's order, and the
// checks every family's arguments pass. ZB-H1 and DualPipeV have files of
// their own.
#include "passes/pipeline/Generators.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace braid::pipeline {

std::vector<Entry> gpipeOrder(int64_t /*rank*/, int64_t /*ranks*/,
                              int64_t mbs) {
  std::vector<Entry> order;
  for (int64_t mb = 0; mb < mbs; ++mb)
    order.push_back(Entry::f(mb, 0));
  for (int64_t mb = 0; mb < mbs; ++mb)
    order.push_back(Entry::bw(mb, 0));
  return order;
}

// Rank r runs P - r - 1 forwards ahead (warm-up), then alternates one
// forward and one backward, then drains the backwards (cool-down).
std::vector<Entry> oneFOneBOrder(int64_t rank, int64_t ranks, int64_t mbs) {
  const int64_t warmup = std::min(ranks - rank - 1, mbs);
  std::vector<Entry> order;
  for (int64_t mb = 0; mb < warmup; ++mb)
    order.push_back(Entry::f(mb, 0));
  for (int64_t i = 0; i < mbs - warmup; ++i) {
    order.push_back(Entry::f(warmup + i, 0));
    order.push_back(Entry::bw(i, 0));
  }
  for (int64_t mb = mbs - warmup; mb < mbs; ++mb)
    order.push_back(Entry::bw(mb, 0));
  return order;
}

// Megatron-Core's interleaving: virtual micro-batch k (of M * V) is
// micro-batch (k / (P V)) P + k % P of chunk (k % (P V)) / P, its
// backwards visiting the chunks in reverse. Warm-up: 2 (P - r - 1) +
// (V - 1) P forwards, or all of them when M = P.
std::vector<Entry> interleavedOrder(int64_t rank, int64_t ranks, int64_t chunks,
                                    int64_t mbs) {
  const int64_t total = mbs * chunks, group = ranks * chunks;
  auto entry = [&](int64_t k, bool forward) {
    int64_t chunk = (k % group) / ranks;
    if (!forward)
      chunk = chunks - 1 - chunk;
    const int64_t mb = (k / group) * ranks + k % ranks;
    return forward ? Entry::f(mb, chunk) : Entry::bw(mb, chunk);
  };
  const int64_t warmup =
      mbs == ranks
          ? total
          : std::min(2 * (ranks - rank - 1) + (chunks - 1) * ranks, total);
  std::vector<Entry> order;
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back(entry(k, true));
  for (int64_t i = 0; i < total - warmup; ++i) {
    order.push_back(entry(warmup + i, true));
    order.push_back(entry(i, false));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    order.push_back(entry(k, false));
  return order;
}

absl::StatusOr<Schedule> makeSchedule(Family family, int64_t ranks,
                                      int64_t chunks, int64_t microBatches) {
  const std::string name = familyName(family);
  if (ranks < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(ranks, " is not a number of pipeline stages"));
  if (microBatches < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(microBatches, " is not a number of micro-batches"));
  Schedule s;
  s.family = family;
  s.microBatches = microBatches;
  s.placement.ranks = ranks;
  switch (family) {
  case Family::kInterleaved:
    if (chunks < 2)
      return absl::InvalidArgumentError(absl::StrCat(
          "INTERLEAVED needs virtual_stages of 2 or more (it is ", chunks,
          "); set virtual_stages, or use ONE_F_ONE_B for one chunk per "
          "rank"));
    if (microBatches % ranks != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "INTERLEAVED needs the micro-batches to be a multiple of "
          "pipeline_parallel (",
          ranks, "); there are ", microBatches, ": make the global batch ",
          "give ", (microBatches / ranks + 1) * ranks, " micro-batches"));
    s.placement.chunks = chunks;
    break;
  case Family::kDualPipeV:
    if (chunks != 1)
      return absl::InvalidArgumentError(
          "virtual_stages does not combine with DUALPIPE_V: its V placement "
          "already gives every rank two chunks (stages r and 2P-1-r); remove "
          "virtual_stages");
    if (microBatches < 2 * ranks)
      return absl::InvalidArgumentError(absl::StrCat(
          "DUALPIPE_V needs at least 2 x pipeline_parallel = ", 2 * ranks,
          " micro-batches; there are ", microBatches,
          ": raise the global batch or lower the micro-batch size"));
    s.placement.chunks = 2;
    s.placement.vShape = true;
    break;
  default:
    if (chunks != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("virtual_stages applies to INTERLEAVED only; ", name,
                       " runs one chunk per rank: remove virtual_stages or use "
                       "INTERLEAVED"));
    break;
  }
  for (int64_t r = 0; r < ranks; ++r) {
    switch (family) {
    case Family::kGPipe:
      s.ranks.push_back(gpipeOrder(r, ranks, microBatches));
      break;
    case Family::kOneFOneB:
      s.ranks.push_back(oneFOneBOrder(r, ranks, microBatches));
      break;
    case Family::kInterleaved:
      s.ranks.push_back(interleavedOrder(r, ranks, chunks, microBatches));
      break;
    case Family::kZbH1:
      s.ranks.push_back(zbH1Order(r, ranks, microBatches));
      break;
    case Family::kDualPipeV:
      s.ranks.push_back(dualPipeVOrder(r, ranks, microBatches));
      break;
    }
  }
  return s;
}

} // namespace braid::pipeline
