// The sequence- and context-parallel layout kernels take_part, stack_parts
// and unstack_parts (docs/kernels.md, "Sequence parallel"): copies of the
// runs of PartCopy.h, byte for byte whatever the dtype, split over runs.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kernels/common/PartCopy.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"

namespace braid::cpu {
namespace {

// About 64 KiB of copying per task.
constexpr int64_t kBytesPerTask = int64_t{1} << 16;

void runCopy(const KernelArgs &args, std::string_view name) {
  const TensorView &x = args.ins[0], &y = args.outs[0];
  const KernelParams &params = paramsOf(args);
  const KernelContext &ctx = contextOf(args);
  // `axis`: 1 (TP, the default) or 2 (CP) names whose coordinate the
  // part (take_part) or the ring order (the others) is.
  const int64_t rank = params.intOr("axis", 1) == 2 ? ctx.cpRank : ctx.tpRank;
  const PartCopy plan = PartCopy::of(
      name, *x.desc, *y.desc, params.intOr("dim", 0), rank,
      params.intOr("balanced", 0) != 0, params.intOr("ring", 0) != 0,
      params.intOr("ring_offset", 0));
  const int64_t size = dtypeSize(y.desc->dtype);
  auto *dst = static_cast<unsigned char *>(y.data);
  const auto *src = static_cast<const unsigned char *>(x.data);
  if (plan.zero) {
    if (y.numel() > 0)
      std::memset(dst, 0, static_cast<size_t>(y.numel() * size));
    return;
  }
  const int64_t bytes = plan.len * size;
  if (bytes == 0)
    return;
  parallelFor(
      poolOf(args), plan.chunks, std::max<int64_t>(1, kBytesPerTask / bytes),
      [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t at = plan.source(q) * size;
          if (plan.scatter)
            std::memcpy(dst + at, src + q * bytes, static_cast<size_t>(bytes));
          else
            std::memcpy(dst + q * bytes, src + at, static_cast<size_t>(bytes));
        }
      });
}

void runTakePart(const KernelArgs &args) { runCopy(args, "take_part"); }
void runStackParts(const KernelArgs &args) { runCopy(args, "stack_parts"); }
void runUnstackParts(const KernelArgs &args) { runCopy(args, "unstack_parts"); }

} // namespace

absl::Status registerPartsKernels(KernelRegistry &registry) {
  return registerAll(registry, {
                                   {"take_part", runTakePart},
                                   {"stack_parts", runStackParts},
                                   {"unstack_parts", runUnstackParts},
                               });
}

} // namespace braid::cpu
