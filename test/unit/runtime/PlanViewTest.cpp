// Views (plan.proto Tensor.view_of): ACTIVATION tensors naming a byte range
// of a base, so that a GEMM's output can be all-reduced chunk by chunk on a
// communication stream while stream 0 computes the next chunk. The loader
// checks the view table, counts a view's uses as its base's in the arena
// sweep, and orders streams by the bytes each use touches.
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanLoader.h"
#include "test/unit/runtime/LoadChecks.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TestKernels.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::expectRefused;
using test::idOf;
using test::loadOnCpu;

// The tensors of a chunked output: y, f32 [8, 8] (256 bytes), its halves
// c0 = bytes [0, 128) and c1 = [128, 256), and mid = [64, 192), which
// overlaps both.
struct Ids {
  uint32_t y, c0, c1, mid;
};

struct Options {
  // The last read of y on stream 0 waits for stream 1's all-reduce of c0.
  bool finalWait = true;
  // What stream 0 writes while stream 1 sums c0.
  bool meanwhileMid = false;
  // Between the sums and the last read, stream 0 writes this (an id the
  // adjustment returns), or nothing for ~0u.
  std::function<uint32_t(test::PlanBuilder &, const Ids &)> adjust;
  // Where the extra tensor is used: after c0's write and before the last
  // read of y (while c0 is live), or after that read.
  bool extraAfterLastRead = false;
};

// Stream 0 writes c0; stream 1, after an event, sums c0 along TP; stream 0
// meanwhile writes c1 (disjoint bytes, no order with stream 1); stream 0
// reads the whole of y after waiting for stream 1.
plan::Plan chunkedPlan(const Options &o = {}) {
  test::PlanBuilder b;
  b.plan().mutable_mesh()->set_tp(2);
  b.plan().set_num_streams(2);
  b.standardInputsAndScalars();
  b.parameter("w", {4}, plan::ONES);
  Ids ids;
  ids.y = b.tensor("y", {8, 8}, plan::F32, plan::ACTIVATION);
  ids.c0 = b.view("y.c0", {4, 8}, ids.y, 0);
  ids.c1 = b.view("y.c1", {4, 8}, ids.y, 128);
  ids.mid = b.view("y.mid", {4, 8}, ids.y, 64);
  const uint32_t extra = o.adjust ? o.adjust(b, ids) : ~0u;
  b.beginMicroBatch(0);
  b.launch("step", 0, "test.touch", {}, {ids.c0});
  b.record("step", 0, 0, 1);
  b.wait("step", 1, 0, 1);
  b.collective(1, plan::ALL_REDUCE_SUM, plan::TP, {ids.c0});
  b.record("step", 1, 1, 1);
  b.launch("step", 0, "test.touch", {}, {o.meanwhileMid ? ids.mid : ids.c1});
  if (extra != ~0u && !o.extraAfterLastRead) {
    b.launch("step", 0, "test.touch", {}, {extra});
    b.launch("step", 0, "test.touch", {extra}, {});
  }
  if (o.finalWait)
    b.wait("step", 0, 1, 1);
  b.launch("step", 0, "test.touch", {ids.y}, {});
  if (extra != ~0u && o.extraAfterLastRead) {
    b.launch("step", 0, "test.touch", {}, {extra});
    b.launch("step", 0, "test.touch", {extra}, {});
  }
  b.endMicroBatch();
  b.finishStep();
  return b.build();
}

std::string ref(const plan::Plan &p, uint32_t id) {
  return absl::StrCat("plan.tensors[", id, "] (", p.tensors(id).name(), ")");
}

TEST(PlanViews, AcceptsDisjointChunksOfOneBaseOnTwoStreams) {
  // c0, c1, mid and y all share bytes and are live together: views are not
  // checked against their base or one another in the arena sweep.
  plan::Plan p = chunkedPlan();
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
}

TEST(PlanViews, RefusesABaseReadUnorderedWithAViewWrite) {
  Options o;
  o.finalWait = false;
  plan::Plan p = chunkedPlan(o);
  const uint32_t c0 = idOf(p, "y.c0"), y = idOf(p, "y");
  const uint64_t base = p.tensors(y).offset();
  expectRefused(
      p, absl::StrCat("instructions 5 (collective, stream 1) and 8 (launch "
                      "test.touch, stream 0) use ",
                      ref(p, c0), " and ", ref(p, y),
                      ", a view and its base, which share bytes [", base, ", ",
                      base + 128,
                      "), and at least one writes them, but no event orders "
                      "them: record an event after the first and wait for it "
                      "before the second"));
}

TEST(PlanViews, RefusesOverlappingViewsOnTwoStreams) {
  Options o;
  o.meanwhileMid = true;
  plan::Plan p = chunkedPlan(o);
  const uint32_t c0 = idOf(p, "y.c0"), mid = idOf(p, "y.mid");
  const uint64_t base = p.tensors(idOf(p, "y")).offset();
  expectRefused(p, absl::StrCat("use ", ref(p, c0), " and ", ref(p, mid),
                                ", views of one base, ", ref(p, idOf(p, "y")),
                                ", which share bytes [", base + 64, ", ",
                                base + 128,
                                "), and at least one writes them, but no "
                                "event orders them"));
}

TEST(PlanViews, RefusesAnActivationSharingBytesWithABaseWhileAViewIsLive) {
  // `other` takes y's bytes. y itself is used only by the last read, but
  // c0 is live from its write to that read, and so is y.
  Options o;
  o.adjust = [](test::PlanBuilder &b, const Ids &ids) {
    return b.activationAt("other", {8, 8}, ids.y);
  };
  plan::Plan p = chunkedPlan(o);
  const uint32_t y = idOf(p, "y"), other = idOf(p, "other");
  expectRefused(p, absl::StrCat(ref(p, y), " and ", ref(p, other),
                                " share arena bytes [", p.tensors(y).offset(),
                                ", ", p.tensors(y).offset() + 256,
                                ") while both are live in plan.programs[0] "
                                "(step)"));
  expectRefused(p, "; a base is live wherever any of its views is used");
  // After the base's last use (its views' included), the bytes are free.
  o.extraAfterLastRead = true;
  p = chunkedPlan(o);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  // Sharing only a view's bytes counts as sharing the base's.
  o.extraAfterLastRead = false;
  o.adjust = [](test::PlanBuilder &b, const Ids &ids) {
    return b.activationAt("other", {4, 8}, ids.c1);
  };
  p = chunkedPlan(o);
  expectRefused(p,
                absl::StrCat(ref(p, idOf(p, "y")), " and ",
                             ref(p, idOf(p, "other")), " share arena bytes"));
}

// Breaks the chunked plan's view table with `mutate`.
plan::Plan
withTable(const std::function<void(plan::Plan &, const Ids &)> &mutate) {
  plan::Plan p = chunkedPlan();
  Ids ids{idOf(p, "y"), idOf(p, "y.c0"), idOf(p, "y.c1"), idOf(p, "y.mid")};
  mutate(p, ids);
  return p;
}

TEST(PlanViews, RefusesBadViewTables) {
  auto bytes = [](const plan::Plan &p, uint32_t id) {
    const plan::Tensor &t = p.tensors(id);
    return absl::StrCat("[", t.offset(), ", ", t.offset() + t.size_bytes(),
                        ")");
  };
  // A view outside its base: c1 moved to start 192 bytes in, so it ends 64
  // bytes past y.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.c1)->set_offset(p.tensors(ids.y).offset() + 192);
      p.mutable_memory()->set_arena_bytes(p.memory().arena_bytes() + 1024);
    });
    const Ids ids{idOf(p, "y"), idOf(p, "y.c0"), idOf(p, "y.c1"), 0};
    expectRefused(p,
                  absl::StrCat(ref(p, ids.c1), " is a view of ", ref(p, ids.y),
                               " but its bytes ", bytes(p, ids.c1),
                               " are not inside the base's ", bytes(p, ids.y)));
  }
  // One that starts before it.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.c0)->set_offset(p.tensors(ids.y).offset() - 64);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.c0")), " is a view of ",
                                  ref(p, idOf(p, "y")), " but its bytes ",
                                  bytes(p, idOf(p, "y.c0")),
                                  " are not inside the base's"));
  }
  // A view of a view.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.mid)->set_view_of(ids.c0 + 1);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")), " is a view of ",
                                  ref(p, idOf(p, "y.c0")),
                                  ", which is itself a view (of ",
                                  ref(p, idOf(p, "y")),
                                  "): a view's base owns its bytes; name that "
                                  "base instead"));
  }
  // A view of a tensor that is not an ACTIVATION.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      const uint32_t grad = idOf(p, "w.grad");
      p.mutable_tensors(ids.mid)->set_view_of(grad + 1);
      p.mutable_tensors(ids.mid)->set_offset(p.tensors(grad).offset());
      p.mutable_tensors(ids.mid)->clear_shape();
      p.mutable_tensors(ids.mid)->add_shape(4);
      p.mutable_tensors(ids.mid)->set_size_bytes(16);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")), " is a view of ",
                                  ref(p, idOf(p, "w.grad")),
                                  ", a GRADIENT tensor: a view's base is an "
                                  "ACTIVATION tensor"));
  }
  // A view that is not an ACTIVATION itself.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.mid)->set_kind(plan::SCALAR);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")), " is a view of ",
                                  ref(p, idOf(p, "y")),
                                  " but is a SCALAR tensor: only ACTIVATION "
                                  "tensors are views"));
  }
  // A dtype other than the base's.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      plan::Tensor &t = *p.mutable_tensors(ids.mid);
      t.set_dtype(plan::BF16);
      t.set_size_bytes(64);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")),
                                  " is bf16 but is a view of ",
                                  ref(p, idOf(p, "y")),
                                  ", which is f32: a view has its base's "
                                  "dtype"));
  }
  // A base that is not in the table, and a view of itself.
  {
    plan::Plan p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.mid)->set_view_of(p.tensors_size() + 1);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")), " has view_of ",
                                  p.tensors_size() + 1, ", a view of tensor ",
                                  p.tensors_size(),
                                  ", which is not below the plan's ",
                                  p.tensors_size(), " tensors"));
    p = withTable([](plan::Plan &p, const Ids &ids) {
      p.mutable_tensors(ids.mid)->set_view_of(ids.mid + 1);
    });
    expectRefused(p, absl::StrCat(ref(p, idOf(p, "y.mid")), " has view_of ",
                                  idOf(p, "y.mid") + 1, ", a view of itself"));
  }
}

// No instruction writes bytes it also reaches through another tensor: the
// kernels assume their outputs alias nothing else of the launch.
TEST(PlanViews, RefusesAnInstructionWritingBytesItReachesTwice) {
  auto plan =
      [](const std::function<void(test::PlanBuilder &, const Ids &)> &emit) {
        test::PlanBuilder b;
        b.plan().mutable_mesh()->set_tp(2);
        b.standardInputsAndScalars();
        b.parameter("w", {4}, plan::ONES);
        Ids ids;
        ids.y = b.tensor("y", {8, 8}, plan::F32, plan::ACTIVATION);
        ids.c0 = b.view("y.c0", {4, 8}, ids.y, 0);
        ids.c1 = b.view("y.c1", {4, 8}, ids.y, 128);
        ids.mid = b.view("y.mid", {4, 8}, ids.y, 64);
        b.beginMicroBatch(0);
        b.launch("step", 0, "test.touch", {}, {ids.y});
        emit(b, ids);
        b.launch("step", 0, "test.touch", {ids.y}, {});
        b.endMicroBatch();
        b.finishStep();
        return b.build();
      };
  // Disjoint chunks may be one launch's input and output, and one
  // all-reduce's tensors.
  plan::Plan p = plan([](test::PlanBuilder &b, const Ids &ids) {
    b.launch("step", 0, "test.touch", {ids.c0}, {ids.c1});
    b.collective(0, plan::ALL_REDUCE_SUM, plan::TP, {ids.c0, ids.c1});
  });
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  p = plan([](test::PlanBuilder &b, const Ids &ids) {
    b.launch("step", 0, "test.touch", {ids.y}, {ids.c0});
  });
  expectRefused(p,
                absl::StrCat("plan.programs[0] (step) instruction 3 (launch "
                             "test.touch) writes ",
                             ref(p, idOf(p, "y.c0")), " and also reads ",
                             ref(p, idOf(p, "y")),
                             ", a view and its base, which share bytes [",
                             p.tensors(idOf(p, "y")).offset(), ", ",
                             p.tensors(idOf(p, "y")).offset() + 128,
                             "): an instruction never writes bytes it reaches "
                             "through another tensor"));
  p = plan([](test::PlanBuilder &b, const Ids &ids) {
    b.launch("step", 0, "test.touch", {}, {ids.c0, ids.mid});
  });
  expectRefused(p, absl::StrCat("writes ", ref(p, idOf(p, "y.c0")),
                                " and also writes ", ref(p, idOf(p, "y.mid")),
                                ", views of one base"));
  p = plan([](test::PlanBuilder &b, const Ids &ids) {
    b.collective(0, plan::ALL_REDUCE_SUM, plan::TP, {ids.c0, ids.y});
  });
  expectRefused(p, "instruction 3 (collective) writes");
}

// A Repeat body's transients are written before they are read, byte by
// byte: a body that writes both halves of y may read y; one that writes
// only c0 may not. And a base is a body's transient with its views.
TEST(PlanViews, RepeatBodiesFollowTheBytesTheirViewsWrite) {
  auto plan = [](bool both, bool outside) {
    test::PlanBuilder b;
    b.standardInputsAndScalars();
    b.parameter("w", {4}, plan::ONES);
    const uint32_t y = b.tensor("y", {8, 8}, plan::F32, plan::ACTIVATION);
    const uint32_t c0 = b.view("y.c0", {4, 8}, y, 0);
    const uint32_t c1 = b.view("y.c1", {4, 8}, y, 128);
    b.beginRepeat(1);
    b.beginMicroBatch(0);
    b.launch("step", 0, "test.touch", {}, {c0});
    if (both)
      b.launch("step", 0, "test.touch", {}, {c1});
    b.launch("step", 0, "test.touch", {y}, {});
    b.endMicroBatch();
    b.endRepeat();
    if (outside)
      b.launch("step", 0, "test.touch", {c1}, {});
    b.finishStep();
    return b.build();
  };
  plan::Plan p = plan(true, false);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  p = plan(false, false);
  expectRefused(p, absl::StrCat("instruction 4: reads ", ref(p, idOf(p, "y")),
                                " before its Repeat body writes all of its "
                                "bytes, so a value would carry from one "
                                "iteration into the next"));
  p = plan(true, true);
  expectRefused(p, absl::StrCat(": uses ", ref(p, idOf(p, "y.c1")),
                                ", a view of ", ref(p, idOf(p, "y")),
                                ", a transient of the Repeat body at "
                                "instruction 0; a body's transients are used "
                                "inside it only"));
}

} // namespace
} // namespace braid
