// The static arena layout. The compiler reuses activation bytes between
// tensors whose lifetimes do not meet; everything else owns its bytes for the
// whole run. A layout that breaks this would silently corrupt training, so
// the loader proves it from the offsets and the programs.
#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"

namespace braid::plan_checks {
namespace {

// First and last instruction (inclusive, program order) that use a tensor.
struct LiveRange {
  int program;
  int first;
  int last;
};

std::vector<std::vector<LiveRange>> liveRanges(const plan::Plan &plan,
                                               const LoadedPlan &loaded) {
  std::vector<std::vector<LiveRange>> ranges(plan.tensors_size());
  for (int p = 0; p < static_cast<int>(loaded.programs.size()); ++p) {
    const auto &insts = loaded.programs[p].instructions;
    for (int i = 0; i < static_cast<int>(insts.size()); ++i) {
      auto touch = [&](uint32_t id) {
        if (plan.tensors(id).kind() != plan::ACTIVATION)
          return;
        std::vector<LiveRange> &r = ranges[id];
        if (!r.empty() && r.back().program == p)
          r.back().last = i;
        else
          r.push_back({p, i, i});
      };
      for (uint32_t id : insts[i].inputs)
        touch(id);
      for (uint32_t id : insts[i].outputs)
        touch(id);
    }
  }
  return ranges;
}

// The program both tensors are live in at once, if any.
const LiveRange *firstClash(const std::vector<LiveRange> &a,
                            const std::vector<LiveRange> &b,
                            const LiveRange **other) {
  for (const LiveRange &x : a)
    for (const LiveRange &y : b)
      if (x.program == y.program && x.first <= y.last && y.first <= x.last) {
        *other = &y;
        return &x;
      }
  return nullptr;
}

} // namespace

absl::Status checkArenaLayout(const plan::Plan &plan,
                              const LoadedPlan &loaded) {
  std::vector<uint32_t> order;
  for (int i = 0; i < plan.tensors_size(); ++i)
    if (plan.tensors(i).size_bytes() > 0)
      order.push_back(static_cast<uint32_t>(i));
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return plan.tensors(a).offset() < plan.tensors(b).offset() ||
           (plan.tensors(a).offset() == plan.tensors(b).offset() && a < b);
  });
  auto end = [&](uint32_t id) {
    return plan.tensors(id).offset() + plan.tensors(id).size_bytes();
  };
  std::vector<std::vector<LiveRange>> ranges = liveRanges(plan, loaded);

  // Sweep in offset order, keeping the tensors whose bytes reach the current
  // offset; every pair that shares bytes meets in this set exactly once.
  std::vector<uint32_t> open;
  for (uint32_t id : order) {
    const plan::Tensor &t = plan.tensors(id);
    open.erase(std::remove_if(open.begin(), open.end(),
                              [&](uint32_t o) { return end(o) <= t.offset(); }),
               open.end());
    for (uint32_t o : open) {
      const plan::Tensor &u = plan.tensors(o);
      std::string shared =
          absl::StrCat(tensorRef(plan, o), " and ", tensorRef(plan, id),
                       " share arena bytes [", t.offset(), ", ",
                       std::min(end(o), end(id)), ")");
      if (u.kind() != plan::ACTIVATION || t.kind() != plan::ACTIVATION)
        return absl::InvalidArgumentError(absl::StrCat(
            shared, ", but ",
            u.kind() != plan::ACTIVATION ? tensorRef(plan, o)
                                         : tensorRef(plan, id),
            " is a ",
            tensorKindName(u.kind() != plan::ACTIVATION ? u.kind() : t.kind()),
            " tensor: only ACTIVATION tensors may reuse bytes"));
      const LiveRange *theirs = nullptr;
      if (const LiveRange *mine = firstClash(ranges[o], ranges[id], &theirs))
        return absl::InvalidArgumentError(absl::StrCat(
            shared, " while both are live in plan.programs[", mine->program,
            "] (", absl::CEscape(loaded.programs[mine->program].name),
            "): instructions ", mine->first, "..", mine->last, " and ",
            theirs->first, "..", theirs->last,
            "; activations may share bytes only when their live ranges are "
            "disjoint"));
    }
    open.push_back(id);
  }
  return absl::OkStatus();
}

} // namespace braid::plan_checks
