// The host arena (plan.proto Tensor.host, MemoryReport.host_bytes): where
// offloaded activations live, pinned host memory on a GPU. The loader
// refuses every host tensor that is not a plain ACTIVATION within
// host_bytes and every use of one but a copy launch, and checks the host
// arena as an address space of its own; a device copies a tensor to the
// host and back across two streams, and measures each arena's high-water
// mark apart.
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/executor/Executor.h"
#include "runtime/executor/StagingLayout.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/MemoryReport.h"
#include "test/unit/runtime/LoadChecks.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyPipelinePlan.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::floatAttr;
using test::PlanBuilder;

// The copy stream, as the compiler's offload uses one beside stream 0.
constexpr uint32_t kCopyStream = 3;
// Where the second host tensor starts: past the device arena's end, so
// that a host tensor counted in the device arena's mark would show.
constexpr int64_t kHighHostOffset = 4096;

using test::expectRefused;
using test::idOf;
using test::loadOnCpu;

std::string ref(const plan::Plan &p, uint32_t id) {
  return absl::StrCat("plan.tensors[", id, "] (", p.tensors(id).name(), ")");
}

// What a test adds to the offload plan: tensors, before any instruction;
// instructions while the copy stream offloads (after stream 0's first
// record, before its first wait); instructions at the end of the step.
using Adjust = std::function<void(PlanBuilder &)>;
struct Hooks {
  Adjust tensors;
  Adjust meanwhile;
  Adjust atEnd;
};

Hooks withTensors(Adjust tensors) { return Hooks{std::move(tensors), {}, {}}; }
Hooks meanwhile(Adjust meanwhile, Adjust tensors = nullptr) {
  return Hooks{std::move(tensors), std::move(meanwhile), {}};
}
Hooks atEnd(Adjust atEnd, Adjust tensors = nullptr) {
  return Hooks{std::move(tensors), {}, std::move(atEnd)};
}

// Activation offload as the compiler emits it, twice over. Stream 0 copies
// parameter w into activation x; the copy stream, after an event, offloads
// x into host tensors h0 (host offset 0) and h1 (kHighHostOffset); stream 0,
// after the next event, overwrites x; the copy stream then brings h0 and h1
// back into activations x0 and x1; stream 0, after a last event, copies x0
// into w's gradient and x1 into its first moment, which outlive the step.
//
// `canary`, the first tensor of the device arena, shares offset 0 with h0
// and nothing uses it: a host tensor placed in the device arena would
// overwrite it.
plan::Plan offloadPlan(const Hooks &hooks = {}) {
  PlanBuilder b;
  b.parameter("canary", {4, 8}, plan::ONES);
  const uint32_t w = b.parameter("w", {4, 8}, plan::ONES);
  b.standardInputsAndScalars();
  const uint32_t x = b.tensor("x", {4, 8}, plan::F32, plan::ACTIVATION);
  const uint32_t x0 = b.tensor("x0", {4, 8}, plan::F32, plan::ACTIVATION);
  const uint32_t x1 = b.tensor("x1", {4, 8}, plan::F32, plan::ACTIVATION);
  const uint32_t h0 = b.hostTensor("h0", {4, 8}, 0);
  const uint32_t h1 = b.hostTensor("h1", {4, 8}, kHighHostOffset);
  if (hooks.tensors)
    hooks.tensors(b);
  const plan::Tensor &param = b.plan().tensors(w);
  const uint32_t grad = param.param().grad();
  const uint32_t moment = param.param().exp_avg();
  b.beginMicroBatch(0);
  b.launch("step", 0, "copy", {w}, {x});
  b.record("step", 0, 0, 1);
  b.wait("step", kCopyStream, 0, 1);
  b.launch("step", kCopyStream, "copy", {x}, {h0});
  b.launch("step", kCopyStream, "copy", {x}, {h1});
  if (hooks.meanwhile)
    hooks.meanwhile(b);
  b.record("step", kCopyStream, 1, 1);
  b.wait("step", 0, 1, 1);
  b.launch("step", 0, "fill", {}, {x}, {floatAttr("value", 0)});
  b.launch("step", kCopyStream, "copy", {h0}, {x0});
  b.launch("step", kCopyStream, "copy", {h1}, {x1});
  b.record("step", kCopyStream, 1, 2);
  b.wait("step", 0, 1, 2);
  b.launch("step", 0, "copy", {x0}, {grad});
  b.launch("step", 0, "copy", {x1}, {moment});
  if (hooks.atEnd)
    hooks.atEnd(b);
  b.endMicroBatch();
  b.finishStep();
  return b.build();
}

TEST(HostArena, AcceptsTheOffloadPlan) {
  const plan::Plan p = offloadPlan();
  // host_bytes reaches h1's end; the device arena ends well before it.
  EXPECT_EQ(p.memory().host_bytes(), uint64_t{kHighHostOffset + 128});
  EXPECT_LT(p.memory().arena_bytes(), uint64_t{kHighHostOffset});
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(p.SerializeAsString(), test::testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_GE(kPlanFormatVersion, 10u);
}

TEST(HostArena, RefusesAHostTensorThatIsAView) {
  plan::Plan p = offloadPlan(withTensors([](PlanBuilder &b) {
    b.view("x.half", {2, 8}, b.id("x"), 64);
  }));
  const uint32_t half = idOf(p, "x.half");
  p.mutable_tensors(half)->set_host(true);
  expectRefused(p, absl::StrCat(ref(p, half),
                                " is on the host (host is set) but is a view "
                                "of ",
                                ref(p, idOf(p, "x"))));
}

TEST(HostArena, RefusesAHostActivationWithAShard) {
  plan::Plan p = offloadPlan();
  const uint32_t h0 = idOf(p, "h0");
  plan::Shard *shard = p.mutable_tensors(h0)->mutable_shard();
  shard->set_axis(plan::TP);
  shard->add_global_shape(4);
  shard->add_global_shape(8);
  expectRefused(p, absl::StrCat(ref(p, h0),
                                " is on the host (host is set) but has a "
                                "shard"));
}

TEST(HostArena, RefusesAHostTensorOutsideTheHostArena) {
  plan::Plan p = offloadPlan();
  const uint32_t h1 = idOf(p, "h1");
  p.mutable_tensors(h1)->set_offset(kHighHostOffset + 64);
  expectRefused(p, absl::StrCat(ref(p, h1), ": offset ", kHighHostOffset + 64,
                                " + size_bytes 128 does not fit in the host "
                                "arena of ",
                                kHighHostOffset + 128,
                                " bytes (plan.memory.host_bytes)"));
  // A plan with no host arena has no room for any host tensor, wherever
  // the device arena's bytes are.
  plan::Plan none = offloadPlan();
  none.mutable_memory()->set_host_bytes(0);
  expectRefused(none, absl::StrCat(ref(none, idOf(none, "h0")),
                                   ": offset 0 + size_bytes 128 does not fit "
                                   "in the host arena of 0 bytes"));
}

TEST(HostArena, RefusesAnUnalignedHostTensor) {
  plan::Plan p = offloadPlan();
  const uint32_t h1 = idOf(p, "h1");
  p.mutable_tensors(h1)->set_offset(kHighHostOffset - 32);
  expectRefused(p, absl::StrCat(ref(p, h1), ": offset ", kHighHostOffset - 32,
                                " is not 64-byte aligned"));
}

TEST(HostArena, RefusesAHostArenaNoProcessCanAddress) {
  plan::Plan p = offloadPlan();
  p.mutable_memory()->set_host_bytes(kMaxArenaBytes + 64);
  expectRefused(p,
                absl::StrCat("plan.memory.host_bytes is ", kMaxArenaBytes + 64,
                             " (128 TiB), more than "
                             "the 128 TiB a process can address"));
}

TEST(HostArena, RefusesAViewOfAHostTensor) {
  plan::Plan p = offloadPlan(withTensors([](PlanBuilder &b) {
    b.view("h0.half", {2, 8}, b.id("h0"), 64);
  }));
  const uint32_t half = idOf(p, "h0.half");
  expectRefused(p, absl::StrCat(ref(p, half), " is a view of ",
                                ref(p, idOf(p, "h0")),
                                ", a host tensor (host is set): host tensors "
                                "have no views"));
}

// The message a use of host tensor `name` by anything but a copy gets.
std::string hostUse(const plan::Plan &p, const std::string &how,
                    const std::string &name) {
  return absl::StrCat(how, " ", ref(p, idOf(p, name)),
                      ", a host tensor (host is set): only launches on "
                      "host streams (plan.host_streams) and launches of "
                      "kernel \"copy\" read or write host tensors");
}

TEST(HostArena, RefusesAnyKernelButCopyOnAHostTensor) {
  plan::Plan reads = offloadPlan(atEnd([](PlanBuilder &b) {
    b.launch("step", 0, "test.touch", {b.id("h0")}, {});
  }));
  expectRefused(reads, absl::StrCat("(kernel test.touch): ",
                                    hostUse(reads, "reads", "h0")));
  plan::Plan writes = offloadPlan(atEnd([](PlanBuilder &b) {
    b.launch("step", 0, "fill", {}, {b.id("h1")}, {floatAttr("value", 1)});
  }));
  expectRefused(
      writes, absl::StrCat("(kernel fill): ", hostUse(writes, "writes", "h1")));
}

TEST(HostArena, RefusesStagingOrReadingBackAHostTensor) {
  plan::Plan staged =
      offloadPlan(atEnd([](PlanBuilder &b) { b.stage(0, b.id("h0"), 0); }));
  expectRefused(staged, hostUse(staged, "stages", "h0"));
  plan::Plan readBack =
      offloadPlan(atEnd([](PlanBuilder &b) { b.readback(0, b.id("h1"), 5); }));
  expectRefused(readBack, hostUse(readBack, "reads back", "h1"));
}

TEST(HostArena, RefusesACollectiveOnAHostTensor) {
  plan::Plan p = offloadPlan(atEnd([](PlanBuilder &b) {
    b.collective(0, plan::ALL_REDUCE_SUM, plan::TP, {b.id("h0")});
  }));
  expectRefused(p, hostUse(p, "the collective names", "h0"));
  plan::Plan gather = offloadPlan(atEnd([](PlanBuilder &b) {
    b.collective(0, plan::ALL_GATHER, plan::TP, {b.id("x0")}, {b.id("h1")});
  }));
  expectRefused(gather, hostUse(gather, "the collective names", "h1"));
}

TEST(HostArena, RefusesSendingOrReceivingAHostTensor) {
  // The host check comes first, so even a plan that is no pipeline hears
  // about the host tensor.
  plan::Plan sent =
      offloadPlan(atEnd([](PlanBuilder &b) { b.send(0, b.id("h0"), 1, 0); }));
  expectRefused(sent, absl::StrCat("(send): ", hostUse(sent, "sends", "h0")));
  plan::Plan received =
      offloadPlan(atEnd([](PlanBuilder &b) { b.recv(0, b.id("h1"), 1, 0); }));
  expectRefused(received,
                absl::StrCat("(recv): ", hostUse(received, "receives", "h1")));
}

TEST(HostArena, IsAnAddressSpaceOfItsOwn) {
  // h0 sits at offset 0 of the host arena and the canary parameter at
  // offset 0 of the device arena: no conflict (the plan loads). A host
  // tensor at live device activation x's offset is no conflict either.
  plan::Plan p = offloadPlan();
  p.mutable_tensors(idOf(p, "h0"))
      ->set_offset(p.tensors(idOf(p, "x")).offset());
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
}

TEST(HostArena, ChecksHostTensorsSharingBytesLikeDeviceActivations) {
  // h1 moved onto h0's bytes while both hold x: refused, naming the host
  // arena.
  plan::Plan live = offloadPlan();
  const uint32_t h0 = idOf(live, "h0"), h1 = idOf(live, "h1");
  live.mutable_tensors(h1)->set_offset(0);
  expectRefused(live, absl::StrCat(ref(live, h0), " and ", ref(live, h1),
                                   " share host arena bytes [0, 128) while "
                                   "both are live"));

  // A host tensor h2 on h0's bytes, written by the copy stream after its
  // last use of h0: lifetimes that do not meet may share bytes.
  const Adjust h2 = [](PlanBuilder &b) { b.hostTensor("h2", {4, 8}, 0); };
  plan::Plan after = offloadPlan(atEnd(
      [](PlanBuilder &b) {
        b.launch("step", kCopyStream, "copy", {b.id("x1")}, {b.id("h2")});
      },
      h2));
  EXPECT_TRUE(loadOnCpu(after).ok()) << loadOnCpu(after);

  // Written on stream 0 while the copy stream offloads into h0, with no
  // event between them: refused.
  plan::Plan clash = offloadPlan(meanwhile(
      [](PlanBuilder &b) {
        b.launch("step", 0, "copy", {b.id("w")}, {b.id("h2")});
      },
      h2));
  expectRefused(clash, absl::StrCat(ref(clash, h0), " and ",
                                    ref(clash, idOf(clash, "h2")),
                                    " share host arena bytes [0, 128) while "
                                    "both are live"));
}

TEST(HostArena, RefusesAHostTensorUsedOnTwoStreamsWithoutAnEvent) {
  // Stream 0 writes h0 while the copy stream writes and reads it.
  plan::Plan p = offloadPlan(meanwhile([](PlanBuilder &b) {
    b.launch("step", 0, "copy", {b.id("w")}, {b.id("h0")});
  }));
  expectRefused(p, absl::StrCat("both use ", ref(p, idOf(p, "h0")),
                                ", and at least one writes it, but no event "
                                "orders them"));
}

TEST(HostArena, ChecksEachStagePlansHostArena) {
  // A host tensor in the second stage of the tiny pipeline, beyond that
  // stage's host_bytes: refused naming the stage. Within it: accepted.
  auto withHostTensor = [](uint64_t hostBytes) {
    plan::Plan p = test::tinyPipelinePlan();
    plan::Plan *stage = p.mutable_stage_plans(1);
    plan::Tensor *t = stage->add_tensors();
    t->set_id(stage->tensors_size() - 1);
    t->set_name("offloaded");
    t->add_shape(16);
    t->set_dtype(plan::F32);
    t->set_kind(plan::ACTIVATION);
    t->set_size_bytes(64);
    t->set_host(true);
    stage->mutable_memory()->set_host_bytes(hostBytes);
    return p;
  };
  EXPECT_TRUE(loadOnCpu(withHostTensor(64)).ok()) << loadOnCpu(withHostTensor(64));
  plan::Plan small = withHostTensor(0);
  expectRefused(small, "plan.stage_plans[1].tensors[");
  expectRefused(small, "(offloaded): offset 0 + size_bytes 64 does not fit "
                       "in the host arena of 0 bytes");
  plan::Plan huge = withHostTensor(kMaxArenaBytes + 64);
  expectRefused(huge, "plan.stage_plans[1].memory.host_bytes is ");
}

TEST(HostArena, TheMemoryReportNamesTheHostArena) {
  plan::MemoryReport m;
  m.set_arena_bytes(uint64_t{8} << 20);
  EXPECT_EQ(formatMemoryReport(m).find("host arena"), std::string::npos);
  m.set_host_bytes(uint64_t{3} << 20);
  const std::string line = formatMemoryReport(m);
  EXPECT_TRUE(absl::EndsWith(line, "| arena 8.00 MiB | host arena 3.00 MiB"))
      << line;
}

// --- Running it --------------------------------------------------------

// w's values: distinct, so that a copy that lost or moved any shows.
std::vector<float> wValues() {
  std::vector<float> v(32);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.5f + static_cast<float>(i) * 1.25f;
  return v;
}

std::vector<float> readTensor(DeviceBackend &d, const plan::Plan &p,
                              const std::string &name) {
  const plan::Tensor &t = p.tensors(idOf(p, name));
  std::vector<float> out(t.size_bytes() / 4);
  absl::Status s = d.read(t.offset(), out.data(), t.size_bytes());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Runs the offload plan's step `runs` times on `device` and checks that
// the values made the round trip through the host arena, that the canary
// sharing h0's offset in the device arena was never touched, and that each
// arena's high-water mark is its own.
void runOffload(Device device, const KernelRegistry &registry, int runs) {
  const plan::Plan proto = offloadPlan();
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(proto.SerializeAsString(), registry, device);
  ASSERT_TRUE(plan.ok()) << plan.status();
  DeviceOptions options;
  options.numThreads = 2;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> made =
      createDevice(*plan, options);
  ASSERT_TRUE(made.ok()) << made.status();
  DeviceBackend &d = **made;
  EXPECT_EQ(d.hostArenaBytes(), proto.memory().host_bytes());
  EXPECT_EQ(d.arenaBytes(), proto.memory().arena_bytes());

  const std::vector<float> w = wValues();
  const std::vector<float> canary(32, -7.0f);
  const plan::Tensor &wt = proto.tensors(idOf(proto, "w"));
  const plan::Tensor &ct = proto.tensors(idOf(proto, "canary"));
  ASSERT_TRUE(d.write(wt.offset(), w.data(), wt.size_bytes()).ok());
  ASSERT_TRUE(d.write(ct.offset(), canary.data(), ct.size_bytes()).ok());
  for (int run = 0; run < runs; ++run) {
    ASSERT_TRUE(
        d.zero(proto.tensors(idOf(proto, "w.grad")).offset(), 128).ok());
    ASSERT_TRUE(
        d.zero(proto.tensors(idOf(proto, "w.exp_avg")).offset(), 128).ok());
    absl::Status s = d.run(plan::STEP, StepValues());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(readTensor(d, proto, "w.grad"), w) << "run " << run;
    EXPECT_EQ(readTensor(d, proto, "w.exp_avg"), w) << "run " << run;
    // x was overwritten after the offload: what came back came from the
    // host tensors.
    EXPECT_EQ(readTensor(d, proto, "x"), std::vector<float>(32, 0.0f));
    EXPECT_EQ(readTensor(d, proto, "canary"), canary) << "run " << run;
  }
  // The host arena by offset (DeviceBackend::readHost...): h0 and h1 hold
  // what x held when it was offloaded, w's values.
  const plan::Tensor &h0 = proto.tensors(idOf(proto, "h0"));
  const plan::Tensor &h1 = proto.tensors(idOf(proto, "h1"));
  std::vector<float> held(32);
  ASSERT_TRUE(d.readTensor(h1, held.data()).ok());
  EXPECT_EQ(held, w);
  ASSERT_TRUE(d.zeroHost(h0.offset(), h0.size_bytes()).ok());
  ASSERT_TRUE(d.readHost(h0.offset(), held.data(), h0.size_bytes()).ok());
  EXPECT_EQ(held, std::vector<float>(32, 0.0f));
  ASSERT_TRUE(d.writeHost(h0.offset(), canary.data(), h0.size_bytes()).ok());
  ASSERT_TRUE(d.readTensor(h0, held.data()).ok());
  EXPECT_EQ(held, canary);
  // The device arena's bytes at the same offset are another tensor's.
  EXPECT_EQ(readTensor(d, proto, "canary"), canary);
  EXPECT_EQ(d.hostTensorArena() != nullptr, device == Device::kCPU);
  const DeviceStats stats = d.stats();
  EXPECT_EQ(stats.hostArenaHighWater, proto.memory().host_bytes());
  // x1, the last device tensor, ends the device arena; the host tensors
  // (h1 ends beyond it) count to the host arena only.
  EXPECT_EQ(stats.arenaHighWater, proto.memory().arena_bytes());
}

TEST(HostArena, CpuCopiesThroughTheHostArenaAndBack) {
  runOffload(Device::kCPU, test::testKernelRegistry(), /*runs=*/2);
}

TEST(HostArena, CudaCopiesThroughThePinnedHostArenaAndBack) {
  if (absl::Status s = probeDevice(Device::kCUDA); !s.ok())
    GTEST_SKIP() << s;
  // Eager, then captured into a CUDA graph, then replayed.
  runOffload(Device::kCUDA, defaultKernelRegistry(), /*runs=*/3);
}

TEST(HostArena, ExecutorMeasuresEachArenaApart) {
  // Bound directly: a host arena smaller than host_bytes is refused, and
  // the marks are 0 until an instruction is issued.
  const plan::Plan proto = offloadPlan();
  absl::StatusOr<LoadedPlan> plan = loadPlan(
      proto.SerializeAsString(), test::testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(plan.ok()) << plan.status();
  StagingLayout layout(*plan);
  std::vector<uint8_t> staging(layout.bytes());
  std::vector<uint8_t> arena(proto.memory().arena_bytes());
  std::vector<uint8_t> host(proto.memory().host_bytes());
  absl::StatusOr<std::unique_ptr<Executor>> small =
      Executor::create(*plan, arena.data(), arena.size(), host.data(),
                       host.size() - 64, staging.data(), layout);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().message(),
            absl::StrCat("the host arena has ", host.size() - 64,
                         " bytes but the plan needs ", host.size(),
                         " (plan.memory.host_bytes)"));
  absl::StatusOr<std::unique_ptr<Executor>> missing =
      Executor::create(*plan, arena.data(), arena.size(), nullptr, host.size(),
                       staging.data(), layout);
  EXPECT_FALSE(missing.ok());

  absl::StatusOr<std::unique_ptr<Executor>> ex =
      Executor::create(*plan, arena.data(), arena.size(), host.data(),
                       host.size(), staging.data(), layout);
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ((*ex)->arenaHighWater(), 0u);
  EXPECT_EQ((*ex)->hostHighWater(), 0u);
  // Each copy names one device and one host tensor: its reach in each
  // arena is its own tensor's.
  const Executor::Program &step = **(*ex)->program(plan::STEP);
  const uint32_t h1 = idOf(proto, "h1"), x = idOf(proto, "x");
  bool sawOffload = false;
  for (const Executor::Op &op : step.ops) {
    if (op.kind != LoadedInstruction::Kind::kLaunch || op.outs.empty() ||
        op.outs[0].data != host.data() + kHighHostOffset)
      continue;
    sawOffload = true;
    EXPECT_EQ(op.ins[0].data, arena.data() + proto.tensors(x).offset());
    EXPECT_EQ(op.hostReach, proto.tensors(h1).offset() + 128);
    EXPECT_EQ(op.arenaReach, proto.tensors(x).offset() + 128);
  }
  EXPECT_TRUE(sawOffload);
}

} // namespace
} // namespace braid
