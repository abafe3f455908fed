// Tensor-parallel shards (plan.proto Shard with axis TP, any dimension, any
// number of blocks): the local <-> whole element mapping, parameter
// initialisation of each part, checkpoint gathers and scatters over a group
// of ranks (threads here), and the loader's rules for TP shards and the
// collectives tensor parallelism emits.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ThreadPool.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/SelfCommunicator.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/ShardLayout.h"
#include "runtime/train/ParameterInit.h"
#include "runtime/train/WholeTensors.h"
#include "test/unit/runtime/LoadChecks.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

// ---------------------------------------------------------------------------
// An independent statement of the layout: the whole tensor's multi-index of
// each local element, with dimension `dim` read as (block, part, row).

std::vector<int64_t> localShapeOf(std::vector<int64_t> whole, int dim,
                                  int64_t parts) {
  whole[dim] /= parts;
  return whole;
}

// Flat whole index of flat local index `local` for part `part`.
int64_t referenceWholeIndex(const std::vector<int64_t> &whole, int dim,
                            int64_t blocks, int64_t parts, int64_t part,
                            int64_t local) {
  const std::vector<int64_t> shape = localShapeOf(whole, dim, parts);
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = local % shape[d];
    local /= shape[d];
  }
  const int64_t piece = whole[dim] / (blocks * parts);
  const int64_t block = idx[dim] / piece, row = idx[dim] % piece;
  idx[dim] = (block * parts + part) * piece + row;
  int64_t flat = 0;
  for (size_t d = 0; d < whole.size(); ++d)
    flat = flat * whole[d] + idx[d];
  return flat;
}

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

struct Split {
  std::vector<int64_t> whole;
  int dim;
  int64_t blocks;
};

// The layouts GPT-2 and Llama use under TP, and a 3-D one.
const Split kSplits[] = {
    {{12, 6}, 0, 1},   // column-parallel: rows of [out, in]
    {{6, 12}, 1, 1},   // row-parallel: columns of [out, in]
    {{24, 4}, 0, 3},   // fused q/k/v [3h, h]: rows of each of q, k, v
    {{4, 24}, 1, 3},   // its transpose, blocks along columns
    {{24}, 0, 3},      // the fused bias [3h]
    {{3, 8, 5}, 1, 2}, // a middle dimension
};

TEST(ShardLayout, MapsLikeTheReferenceAndRoundTrips) {
  for (const Split &s : kSplits)
    for (int64_t parts : {1, 2, 4}) {
      if (s.whole[s.dim] % (s.blocks * parts) != 0)
        continue;
      const int64_t wholeN = numel(s.whole);
      std::vector<int> held(wholeN, 0);
      for (int64_t part = 0; part < parts; ++part) {
        const ShardLayout layout(s.whole, s.dim, s.blocks, parts, part);
        SCOPED_TRACE(absl::StrCat("dim ", s.dim, " blocks ", s.blocks, " P ",
                                  parts, " part ", part));
        ASSERT_EQ(layout.localNumel(), wholeN / parts);
        ASSERT_EQ(layout.wholeNumel(), wholeN);
        ASSERT_EQ(layout.runs() * layout.runLength(), layout.localNumel());
        for (int64_t i = 0; i < layout.localNumel(); ++i) {
          const int64_t w = layout.wholeIndex(i);
          ASSERT_EQ(
              w, referenceWholeIndex(s.whole, s.dim, s.blocks, parts, part, i))
              << "local " << i;
          ASSERT_EQ(layout.localIndex(w), i);
          ++held[w];
        }
        // Each run is contiguous in the whole tensor too.
        for (int64_t r = 0; r < layout.runs(); ++r)
          EXPECT_EQ(layout.wholeStart(r),
                    layout.wholeIndex(r * layout.runLength()));
      }
      // The parts cover the whole tensor once.
      EXPECT_TRUE(
          std::all_of(held.begin(), held.end(), [](int n) { return n == 1; }));
      // Elements another part holds are not this one's.
      const ShardLayout first(s.whole, s.dim, s.blocks, parts, 0);
      int64_t others = 0;
      for (int64_t w = 0; w < wholeN; ++w)
        others += first.localIndex(w) < 0;
      EXPECT_EQ(others, wholeN - wholeN / parts);
    }
}

TEST(ShardLayout, OneBlockOnDimensionZeroIsOneRun) {
  const ShardLayout zero({8, 3}, 0, 1, 4, 2);
  EXPECT_EQ(zero.runs(), 1);
  EXPECT_EQ(zero.wholeStart(0), 2 * 6);
  const ShardLayout whole = ShardLayout::whole({5, 7});
  EXPECT_EQ(whole.runs(), 1);
  EXPECT_EQ(whole.localNumel(), 35);
  EXPECT_EQ(whole.wholeIndex(34), 34);
}

// ---------------------------------------------------------------------------
// Hand-made plans of parameters (each with its two moments), sharded along
// TP as `splits` say over `parts` ranks, or whole with parts = 0; with `dp`
// above 1, each TP part further cut into the rows of `dp` DP ranks (ZeRO's
// dp_rows). No programs: initialisation and checkpoints read only the
// tensor table.

LoadedPlan paramPlan(const std::vector<Split> &splits, int64_t parts,
                     int64_t dp = 1) {
  LoadedPlan p;
  p.proto.set_format_version(kPlanFormatVersion);
  p.proto.set_name("tp");
  p.proto.mutable_train()->set_seed(1234);
  p.proto.mutable_mesh()->set_tp(std::max<int64_t>(parts, 1));
  p.proto.mutable_mesh()->set_cp(1);
  p.proto.mutable_mesh()->set_pp(1);
  p.proto.mutable_mesh()->set_dp(dp);
  uint64_t offset = 0;
  auto add = [&](const std::string &name, const Split &s,
                 plan::TensorKind kind) {
    plan::Tensor &t = *p.proto.add_tensors();
    t.set_id(static_cast<uint32_t>(p.proto.tensors_size() - 1));
    t.set_name(name);
    t.set_kind(kind);
    t.set_dtype(plan::F32);
    std::vector<int64_t> shape =
        parts > 0 ? localShapeOf(s.whole, s.dim, parts) : s.whole;
    if (parts > 0 && dp > 1)
      shape[0] /= dp;
    for (int64_t d : shape)
      t.add_shape(d);
    if (parts > 0) {
      plan::Shard &shard = *t.mutable_shard();
      shard.set_axis(plan::TP);
      shard.set_dim(static_cast<uint32_t>(s.dim));
      shard.set_blocks(static_cast<uint32_t>(s.blocks));
      shard.set_dp_rows(dp > 1);
      for (int64_t d : s.whole)
        shard.add_global_shape(d);
    }
    t.set_size_bytes(static_cast<uint64_t>(numel(shape)) * 4);
    t.set_offset(offset);
    offset = (offset + t.size_bytes() + 63) / 64 * 64;
    p.descs.push_back(TensorDesc{shape, DType::kF32});
    p.tensorsByName.emplace(name, t.id());
    return t.id();
  };
  for (size_t k = 0; k < splits.size(); ++k) {
    const std::string name = absl::StrCat("w", k);
    const uint32_t id = add(name, splits[k], plan::PARAMETER);
    const uint32_t m = add(name + ".exp_avg", splits[k], plan::OPTIMIZER_STATE);
    const uint32_t v =
        add(name + ".exp_avg_sq", splits[k], plan::OPTIMIZER_STATE);
    plan::ParameterInfo &info = *p.proto.mutable_tensors(id)->mutable_param();
    info.set_init(plan::NORMAL);
    info.set_init_std(0.5);
    info.set_exp_avg(m);
    info.set_exp_avg_sq(v);
    p.parameters.push_back(id);
  }
  p.proto.mutable_memory()->set_arena_bytes(offset);
  return p;
}

std::vector<float> tensorOf(const LoadedPlan &p, const uint8_t *arena,
                            uint32_t id) {
  const plan::Tensor &t = p.proto.tensors(id);
  std::vector<float> out(t.size_bytes() / 4);
  std::memcpy(out.data(), arena + t.offset(), t.size_bytes());
  return out;
}

MeshCoords tpCoords(int64_t k) {
  MeshCoords c{};
  c[static_cast<int>(MeshAxis::kTP)] = k;
  return c;
}

TEST(TensorParallelInit, EachPartIsItsSliceOfTheWholeTensor) {
  const std::vector<Split> splits(std::begin(kSplits), std::end(kSplits));
  const LoadedPlan whole = paramPlan(splits, 0);
  std::vector<uint8_t> wholeArena(whole.proto.memory().arena_bytes());
  initParameters(whole, wholeArena.data(), nullptr);
  ThreadPool pool(3);
  for (int64_t parts : {2, 4}) {
    std::vector<Split> fit;
    for (const Split &s : splits)
      if (s.whole[s.dim] % (s.blocks * parts) == 0)
        fit.push_back(s);
    ASSERT_GE(fit.size(), 4u);
    const LoadedPlan wholeFit = paramPlan(fit, 0);
    std::vector<uint8_t> wholeFitArena(wholeFit.proto.memory().arena_bytes());
    initParameters(wholeFit, wholeFitArena.data(), nullptr);
    const LoadedPlan sharded = paramPlan(fit, parts);
    for (int64_t k = 0; k < parts; ++k) {
      std::vector<uint8_t> arena(sharded.proto.memory().arena_bytes());
      // With and without a pool: the values are the same.
      initParameters(sharded, arena.data(), k % 2 ? &pool : nullptr,
                     tpCoords(k));
      for (size_t n = 0; n < fit.size(); ++n) {
        const uint32_t id = sharded.parameters[n];
        const std::vector<float> mine = tensorOf(sharded, arena.data(), id);
        const std::vector<float> all =
            tensorOf(wholeFit, wholeFitArena.data(), wholeFit.parameters[n]);
        SCOPED_TRACE(absl::StrCat("dim ", fit[n].dim, " blocks ", fit[n].blocks,
                                  " P ", parts, " rank ", k));
        for (size_t i = 0; i < mine.size(); ++i)
          ASSERT_EQ(
              mine[i],
              all[referenceWholeIndex(fit[n].whole, fit[n].dim, fit[n].blocks,
                                      parts, k, static_cast<int64_t>(i))])
              << "element " << i;
      }
    }
  }
  // The draws are not constant: the comparison means something.
  const std::vector<float> w0 = tensorOf(whole, wholeArena.data(), 0);
  EXPECT_NE(w0[0], w0[1]);
}

TEST(TensorParallelInit, AShardIsDrawnByItsAxissCoordinateOnly) {
  const LoadedPlan sharded = paramPlan({kSplits[2]}, 2);
  std::vector<uint8_t> a(sharded.proto.memory().arena_bytes());
  std::vector<uint8_t> b(a.size());
  MeshCoords other = tpCoords(1);
  other[static_cast<int>(MeshAxis::kDP)] = 3;
  other[static_cast<int>(MeshAxis::kPP)] = 1;
  initParameters(sharded, a.data(), nullptr, tpCoords(1));
  initParameters(sharded, b.data(), nullptr, other);
  EXPECT_EQ(a, b);
}

// ---------------------------------------------------------------------------
// A group of ranks as threads: each rank's communicator, over shared slots.

class ThreadGroup {
public:
  explicit ThreadGroup(int size) : size_(size), slots_(size), sync_(size) {}
  int size() const { return size_; }
  // Every rank puts `bytes` at `in`; each then gets every rank's, in rank
  // order, at `out`.
  void allGather(int rank, const void *in, void *out, size_t bytes) {
    slots_[rank] = in;
    sync_.arrive_and_wait();
    for (int r = 0; r < size_; ++r)
      std::memcpy(static_cast<uint8_t *>(out) + r * bytes, slots_[r], bytes);
    sync_.arrive_and_wait();
  }

private:
  // A reusable barrier of size_ threads.
  class Barrier {
  public:
    explicit Barrier(int n) : n_(n) {}
    void arrive_and_wait() {
      std::unique_lock<std::mutex> lock(mu_);
      const uint64_t round = round_;
      if (++arrived_ == n_) {
        arrived_ = 0;
        ++round_;
        cv_.notify_all();
        return;
      }
      cv_.wait(lock, [&] { return round_ != round; });
    }

  private:
    int n_;
    int arrived_ = 0;
    uint64_t round_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
  };
  int size_;
  std::vector<const void *> slots_;
  Barrier sync_;
};

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(ThreadGroup &group, int rank)
      : group_(group), rank_(rank),
        name_(absl::StrCat("tp group 0 (thread ", rank, ")")) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  const std::string &name() const override { return name_; }
  absl::Status allReduceSum(void *, size_t, DType) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status reduceScatterSum(const void *, void *, size_t, DType) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status allGather(const void *in, void *out, size_t count,
                         DType dtype) override {
    ++gathers;
    group_.allGather(rank_, in, out, count * dtypeSize(dtype));
    return absl::OkStatus();
  }
  absl::Status broadcast(void *, size_t, int) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status shift(const void *, void *, size_t, DType, int) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status allToAllV(const void *, const size_t *, void *, const size_t *,
                         DType) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status send(const void *, size_t, int, int) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status recv(void *, size_t, int, int) override {
    return absl::UnimplementedError("not in this test");
  }
  int gathers = 0;

private:
  ThreadGroup &group_;
  int rank_;
  std::string name_;
};

// A device whose arena is host memory and which runs nothing.
class ArenaDevice final : public DeviceBackend {
public:
  explicit ArenaDevice(uint64_t bytes) : arena_(bytes), pool_(1) {}
  const DeviceInfo &info() const override { return info_; }
  uint8_t *hostArena() override { return arena_.data(); }
  uint64_t arenaBytes() const override { return arena_.size(); }
  uint64_t hostArenaBytes() const override { return 0; }
  absl::Status read(uint64_t offset, void *out, uint64_t bytes) override {
    std::memcpy(out, arena_.data() + offset, bytes);
    return absl::OkStatus();
  }
  absl::Status write(uint64_t offset, const void *in, uint64_t bytes) override {
    std::memcpy(arena_.data() + offset, in, bytes);
    return absl::OkStatus();
  }
  absl::Status zero(uint64_t offset, uint64_t bytes) override {
    std::memset(arena_.data() + offset, 0, bytes);
    return absl::OkStatus();
  }
  // No host arena: the plans here keep every tensor on the device.
  absl::Status readHost(uint64_t, void *, uint64_t) override {
    return absl::UnimplementedError("no host arena in this test");
  }
  absl::Status writeHost(uint64_t, const void *, uint64_t) override {
    return absl::UnimplementedError("no host arena in this test");
  }
  absl::Status zeroHost(uint64_t, uint64_t) override {
    return absl::UnimplementedError("no host arena in this test");
  }
  uint8_t *hostTensorArena() override { return nullptr; }
  absl::StatusOr<absl::Span<uint8_t>> stageInput(uint32_t, int64_t) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status run(plan::ProgramKind, const StepValues &) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<std::vector<float>> readbacks() override {
    return absl::UnimplementedError("not in this test");
  }
  void setProfile(KernelProfile *) override {}
  void setTrace(ScheduleTrace *) override {}
  DeviceStats stats() const override { return {}; }
  ThreadPool &hostPool() override { return pool_; }
  std::vector<uint8_t> &arena() { return arena_; }

private:
  DeviceInfo info_;
  std::vector<uint8_t> arena_;
  ThreadPool pool_;
};

// ZeRO over TP parts (dp_rows): DP rank j of TP part k holds the part's
// rows [j n0, (j + 1) n0), so its local element i is element j * numel + i
// of the part, drawn as one rank would draw it.
std::vector<Split> splitsWithRowsFor(int64_t parts, int64_t dp) {
  std::vector<Split> fit;
  for (const Split &s : kSplits)
    if (s.whole[s.dim] % (s.blocks * parts) == 0 &&
        localShapeOf(s.whole, s.dim, parts)[0] % dp == 0)
      fit.push_back(s);
  return fit;
}

MeshCoords tpDpCoords(int64_t k, int64_t j) {
  MeshCoords c = tpCoords(k);
  c[static_cast<int>(MeshAxis::kDP)] = j;
  return c;
}

TEST(TensorParallelInit, DpRowsAreTheirRowsOfTheTpPart) {
  const int64_t parts = 2, dp = 2;
  const std::vector<Split> fit = splitsWithRowsFor(parts, dp);
  // Blocks (fused q/k/v) whose rows the DP cut splits inside a block.
  ASSERT_GE(fit.size(), 4u);
  const LoadedPlan wholePlan = paramPlan(fit, 0);
  std::vector<uint8_t> wholeArena(wholePlan.proto.memory().arena_bytes());
  initParameters(wholePlan, wholeArena.data(), nullptr);
  const LoadedPlan sharded = paramPlan(fit, parts, dp);
  ThreadPool pool(3);
  for (int64_t k = 0; k < parts; ++k)
    for (int64_t j = 0; j < dp; ++j) {
      std::vector<uint8_t> arena(sharded.proto.memory().arena_bytes());
      initParameters(sharded, arena.data(), j % 2 ? &pool : nullptr,
                     tpDpCoords(k, j));
      for (size_t n = 0; n < fit.size(); ++n) {
        const std::vector<float> mine =
            tensorOf(sharded, arena.data(), sharded.parameters[n]);
        const std::vector<float> all = tensorOf(wholePlan, wholeArena.data(),
                                                wholePlan.parameters[n]);
        const int64_t first = j * static_cast<int64_t>(mine.size());
        SCOPED_TRACE(absl::StrCat("dim ", fit[n].dim, " blocks ",
                                  fit[n].blocks, " tp ", k, " dp ", j));
        for (size_t i = 0; i < mine.size(); ++i)
          ASSERT_EQ(mine[i],
                    all[referenceWholeIndex(fit[n].whole, fit[n].dim,
                                            fit[n].blocks, parts, k,
                                            first + static_cast<int64_t>(i))])
              << "element " << i;
      }
    }
}

// The value a test puts at whole element `i` of stored tensor `n`.
float marker(size_t n, int64_t i) {
  return static_cast<float>(n * 100000 + i) + 0.5f;
}

TEST(TensorParallelCheckpoint, GatherAndScatterRebuildTheWholeTensors) {
  for (int64_t parts : {2, 4}) {
    std::vector<Split> fit;
    for (const Split &s : kSplits)
      if (s.whole[s.dim] % (s.blocks * parts) == 0)
        fit.push_back(s);
    SCOPED_TRACE(absl::StrCat("P ", parts));
    const LoadedPlan sharded = paramPlan(fit, parts);
    const LoadedPlan wholePlan = paramPlan(fit, 0);
    WholeTensors whole(sharded);
    ASSERT_TRUE(WholeTensors::needed(sharded));
    // The image's plan holds every tensor whole, as the unsharded plan does.
    ASSERT_EQ(whole.plan().proto.tensors_size(),
              wholePlan.proto.tensors_size());
    for (int i = 0; i < wholePlan.proto.tensors_size(); ++i) {
      const plan::Tensor &t = whole.plan().proto.tensors(i);
      const plan::Tensor &u = wholePlan.proto.tensors(i);
      EXPECT_EQ(t.name(), u.name());
      EXPECT_FALSE(t.has_shard()) << t.name();
      EXPECT_TRUE(std::equal(t.shape().begin(), t.shape().end(),
                             u.shape().begin(), u.shape().end()))
          << t.name();
      EXPECT_EQ(t.size_bytes(), u.size_bytes()) << t.name();
    }
    // Each rank's device holds its parts of tensors whose whole values are
    // marker(n, i); the stored tensors are the parameters and moments.
    const int P = static_cast<int>(parts);
    std::vector<std::unique_ptr<ArenaDevice>> devices;
    for (int k = 0; k < P; ++k) {
      devices.push_back(
          std::make_unique<ArenaDevice>(sharded.proto.memory().arena_bytes()));
      for (int n = 0; n < sharded.proto.tensors_size(); ++n) {
        const plan::Tensor &t = sharded.proto.tensors(n);
        const Split &s = fit[n / 3];
        std::vector<float> local(t.size_bytes() / 4);
        for (size_t i = 0; i < local.size(); ++i)
          local[i] = marker(
              n, referenceWholeIndex(s.whole, s.dim, s.blocks, parts, k, i));
        std::memcpy(devices[k]->arena().data() + t.offset(), local.data(),
                    t.size_bytes());
      }
    }
    ThreadGroup group(P);
    std::vector<std::vector<uint8_t>> images(
        P, std::vector<uint8_t>(whole.imageBytes()));
    std::vector<absl::Status> gathered(P);
    std::vector<int> gathers(P);
    {
      std::vector<std::thread> threads;
      for (int k = 0; k < P; ++k)
        threads.emplace_back([&, k] {
          ThreadCommunicator tp(group, k);
          SelfCommunicator self("dp group 0 (rank 0)");
          WholeTensors::AxisGroups groups =
              [&](plan::MeshAxis axis) -> Communicator & {
            return axis == plan::TP ? static_cast<Communicator &>(tp)
                                         : self;
          };
          gathered[k] =
              whole.gather(*devices[k], groups, nullptr, images[k].data());
          gathers[k] = tp.gathers;
        });
      for (std::thread &t : threads)
        t.join();
    }
    for (int k = 0; k < P; ++k) {
      ASSERT_TRUE(gathered[k].ok()) << gathered[k];
      EXPECT_EQ(gathers[k], sharded.proto.tensors_size());
      // Every rank's image holds the whole tensors, in the whole layout.
      for (int n = 0; n < whole.plan().proto.tensors_size(); ++n) {
        const plan::Tensor &t = whole.plan().proto.tensors(n);
        std::vector<float> values(t.size_bytes() / 4);
        std::memcpy(values.data(), images[k].data() + t.offset(),
                    t.size_bytes());
        for (size_t i = 0; i < values.size(); ++i)
          ASSERT_EQ(values[i], marker(n, static_cast<int64_t>(i)))
              << t.name() << " element " << i << " on rank " << k;
      }
    }
    // Resuming: each rank keeps its part of the whole image.
    for (int k = 0; k < P; ++k) {
      ArenaDevice fresh(sharded.proto.memory().arena_bytes());
      ASSERT_TRUE(whole.scatter(images[0].data(), tpCoords(k), fresh).ok());
      EXPECT_EQ(fresh.arena(), devices[k]->arena()) << "rank " << k;
    }
  }
}

// TP 2 x DP 2 with dp_rows: a checkpoint gathers each part's rows over DP,
// then the parts over TP; resuming keeps each rank's rows of its part.
TEST(TensorParallelCheckpoint, DpRowsGatherOverDpThenTp) {
  const int parts = 2, dp = 2;
  const std::vector<Split> fit = splitsWithRowsFor(parts, dp);
  const LoadedPlan sharded = paramPlan(fit, parts, dp);
  WholeTensors whole(sharded);
  const LoadedPlan wholePlan = paramPlan(fit, 0);
  ASSERT_EQ(whole.imageBytes(), wholePlan.proto.memory().arena_bytes());
  // Rank (k, j) holds rows j of TP part k of tensors valued marker(n, i).
  std::vector<std::unique_ptr<ArenaDevice>> devices;
  for (int k = 0; k < parts; ++k)
    for (int j = 0; j < dp; ++j) {
      devices.push_back(
          std::make_unique<ArenaDevice>(sharded.proto.memory().arena_bytes()));
      for (int n = 0; n < sharded.proto.tensors_size(); ++n) {
        const plan::Tensor &t = sharded.proto.tensors(n);
        const Split &s = fit[n / 3];
        std::vector<float> local(t.size_bytes() / 4);
        const int64_t first = j * static_cast<int64_t>(local.size());
        for (size_t i = 0; i < local.size(); ++i)
          local[i] = marker(n, referenceWholeIndex(s.whole, s.dim, s.blocks,
                                                   parts, k, first + i));
        std::memcpy(devices.back()->arena().data() + t.offset(), local.data(),
                    t.size_bytes());
      }
    }
  // One TP group per DP coordinate, one DP group per TP coordinate.
  std::vector<std::unique_ptr<ThreadGroup>> tpGroups, dpGroups;
  for (int j = 0; j < dp; ++j)
    tpGroups.push_back(std::make_unique<ThreadGroup>(parts));
  for (int k = 0; k < parts; ++k)
    dpGroups.push_back(std::make_unique<ThreadGroup>(dp));
  std::vector<std::vector<uint8_t>> images(
      parts * dp, std::vector<uint8_t>(whole.imageBytes()));
  std::vector<absl::Status> gathered(parts * dp);
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < parts; ++k)
      for (int j = 0; j < dp; ++j)
        threads.emplace_back([&, k, j] {
          ThreadCommunicator tp(*tpGroups[j], k), dpComm(*dpGroups[k], j);
          WholeTensors::AxisGroups groups =
              [&](plan::MeshAxis axis) -> Communicator & {
            return axis == plan::TP ? static_cast<Communicator &>(tp)
                                         : dpComm;
          };
          const int r = k * dp + j;
          gathered[r] =
              whole.gather(*devices[r], groups, nullptr, images[r].data());
        });
    for (std::thread &t : threads)
      t.join();
  }
  for (int r = 0; r < parts * dp; ++r) {
    ASSERT_TRUE(gathered[r].ok()) << gathered[r];
    for (int n = 0; n < whole.plan().proto.tensors_size(); ++n) {
      const plan::Tensor &t = whole.plan().proto.tensors(n);
      std::vector<float> values(t.size_bytes() / 4);
      std::memcpy(values.data(), images[r].data() + t.offset(),
                  t.size_bytes());
      for (size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(values[i], marker(n, static_cast<int64_t>(i)))
            << t.name() << " element " << i << " on rank " << r;
    }
  }
  for (int k = 0; k < parts; ++k)
    for (int j = 0; j < dp; ++j) {
      ArenaDevice fresh(sharded.proto.memory().arena_bytes());
      ASSERT_TRUE(
          whole.scatter(images[0].data(), tpDpCoords(k, j), fresh).ok());
      EXPECT_EQ(fresh.arena(), devices[k * dp + j]->arena())
          << "tp " << k << " dp " << j;
    }
}

TEST(TensorParallelCheckpoint, AGroupOfTheWrongSizeIsAnError) {
  const LoadedPlan sharded = paramPlan({kSplits[1]}, 2);
  WholeTensors whole(sharded);
  ArenaDevice device(sharded.proto.memory().arena_bytes());
  std::vector<uint8_t> image(whole.imageBytes());
  SelfCommunicator self("tp group 0 (rank 0)");
  absl::Status s = whole.gather(
      device, [&](plan::MeshAxis) -> Communicator & { return self; }, nullptr,
      image.data());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message())
                .find("w0 is sharded over the 2 ranks of "
                      "a tp group, but tp group 0 (rank "
                      "0) has 1"),
            std::string::npos)
      << s;
}

// ---------------------------------------------------------------------------
// The loader: TP shards on the tiny model.

using test::expectRefused;
using test::loadOnCpu;

plan::Tensor &named(plan::Plan &p, const std::string &name) {
  for (plan::Tensor &t : *p.mutable_tensors())
    if (t.name() == name)
      return t;
  ADD_FAILURE() << "no tensor " << name;
  return *p.mutable_tensors(0);
}

void setShard(plan::Tensor &t, plan::MeshAxis axis, uint32_t dim,
              std::vector<int64_t> global, uint32_t blocks = 0) {
  plan::Shard &s = *t.mutable_shard();
  s.set_axis(axis);
  s.set_dim(dim);
  s.set_blocks(blocks);
  s.clear_global_shape();
  for (int64_t d : global)
    s.add_global_shape(d);
}

// lm_head.weight ([256, 16]) and its moments as one shard over `tp` ranks.
plan::Plan shardedHead(int64_t tp, plan::MeshAxis axis, uint32_t dim,
                       std::vector<int64_t> global, uint32_t blocks = 0) {
  plan::Plan p = test::tinyModelPlan();
  p.mutable_mesh()->set_tp(tp);
  for (const char *suffix : {"", ".exp_avg", ".exp_avg_sq", ".grad"})
    setShard(named(p, std::string("lm_head.weight") + suffix), axis, dim,
             global, blocks);
  return p;
}

TEST(TensorParallelLoader, AcceptsShardsAlongTpOnAnyDimensionInBlocks) {
  EXPECT_TRUE(loadOnCpu(shardedHead(2, plan::TP, 0, {512, 16})).ok());
  EXPECT_TRUE(loadOnCpu(shardedHead(2, plan::TP, 1, {256, 32})).ok());
  EXPECT_TRUE(loadOnCpu(shardedHead(4, plan::TP, 1, {256, 64})).ok());
  // Blocks: 512 rows in 4 blocks of 2 parts; 64 columns in 2 blocks of 4.
  EXPECT_TRUE(loadOnCpu(shardedHead(2, plan::TP, 0, {512, 16}, 4)).ok());
  EXPECT_TRUE(loadOnCpu(shardedHead(4, plan::TP, 1, {256, 64}, 2)).ok());
  // blocks 1 says what 0 does.
  EXPECT_TRUE(loadOnCpu(shardedHead(2, plan::TP, 1, {256, 32}, 1)).ok());
  // A TP shard over one rank is the whole tensor.
  EXPECT_TRUE(loadOnCpu(shardedHead(1, plan::TP, 1, {256, 16})).ok());
  // A vector in blocks (the layout of GPT-2's fused q/k/v bias): [32] in
  // 2 blocks over TP 2, 8 elements of each block on each rank.
  plan::Plan p = test::tinyModelPlan();
  p.mutable_mesh()->set_tp(2);
  for (const char *suffix : {"", ".exp_avg", ".exp_avg_sq"})
    setShard(named(p, std::string("model.norm.weight") + suffix), plan::TP, 0,
             {32}, 2);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
}

TEST(TensorParallelLoader, RefusesBadShards) {
  expectRefused(
      shardedHead(2, plan::TP, 1, {256, 48}),
      "plan.tensors[8] (lm_head.weight) has shape [256, 16] but is a shard of "
      "[256, 48] along dimension 1 over the 2 ranks of a tp group: the shard "
      "must be that dimension divided by 2 and every other dimension whole");
  expectRefused(shardedHead(2, plan::TP, 1, {256, 32}, 3),
                "has shape [256, 16] but is a shard of [256, 32] along "
                "dimension 1 in 3 blocks over the 2 ranks of a tp group: the "
                "shard must be that dimension divided by 2 (and divisible by "
                "6, blocks times ranks) and every other dimension whole");
  expectRefused(shardedHead(2, plan::TP, 0, {512, 32}),
                "has shape [256, 16] but is a shard of [512, 32]");
  expectRefused(shardedHead(2, plan::TP, 0, {512}), "is a shard of [512]");
  expectRefused(shardedHead(2, plan::TP, 2, {256, 16, 2}),
                "(lm_head.weight) has shape [256, 16] but is a shard along "
                "dimension 2, which it does not have");
  // DP (ZeRO) keeps to dimension 0 in one block.
  plan::Plan dp = shardedHead(1, plan::DP, 1, {256, 32});
  dp.mutable_mesh()->set_dp(2);
  expectRefused(dp, "(lm_head.weight): a shard along dimension 1 in 1 blocks "
                    "of the dp axis; this runtime shards along dp on "
                    "dimension 0 in one block only (ZeRO)");
  dp = shardedHead(1, plan::DP, 0, {512, 16}, 2);
  dp.mutable_mesh()->set_dp(2);
  expectRefused(dp, "a shard along dimension 0 in 2 blocks of the dp axis");
  expectRefused(shardedHead(1, plan::PP, 0, {256, 16}),
                "(lm_head.weight): a shard along the pp axis; this runtime "
                "shards along tp (any dimension), dp and ep (dimension 0) only");
  // A moment is the same part as its parameter.
  plan::Plan p = shardedHead(2, plan::TP, 1, {256, 32});
  setShard(named(p, "lm_head.weight.exp_avg"), plan::TP, 1, {256, 32}, 2);
  expectRefused(p, "(lm_head.weight): param.exp_avg names plan.tensors[10] "
                   "(lm_head.weight.exp_avg), which is a shard along tp, "
                   "dimension 1, in 2 blocks, of [256, 32], but the parameter "
                   "is a shard along tp, dimension 1, in 1 block, of [256, "
                   "32]: a moment is sharded as its parameter is");
  p = shardedHead(2, plan::TP, 1, {256, 32});
  named(p, "lm_head.weight.exp_avg_sq").clear_shard();
  expectRefused(p, "(lm_head.weight.exp_avg_sq), which is whole, but the "
                   "parameter is a shard along tp");
}

// ZeRO over TP parts: lm_head.weight [256, 16] is the DP rows of a TP part
// (dp_rows), [256, 32] split along columns over TP 2, rows over DP 2.
plan::Plan rowsOfHead(uint32_t dim, std::vector<int64_t> global) {
  plan::Plan p = shardedHead(2, plan::TP, dim, std::move(global));
  p.mutable_mesh()->set_dp(2);
  for (const char *suffix : {"", ".exp_avg", ".exp_avg_sq", ".grad"})
    named(p, std::string("lm_head.weight") + suffix)
        .mutable_shard()
        ->set_dp_rows(true);
  return p;
}

TEST(TensorParallelLoader, DpRowsAreRowsOfATpPart) {
  EXPECT_TRUE(loadOnCpu(rowsOfHead(1, {512, 32})).ok());
  // Split along dimension 0: TP 2 then DP 2 of its rows, 4 x 256 in all.
  EXPECT_TRUE(loadOnCpu(rowsOfHead(0, {1024, 16})).ok());
  expectRefused(rowsOfHead(1, {256, 32}),
                "has shape [256, 16] but is a shard of [256, 32] along "
                "dimension 1 over the 2 ranks of a tp group: the shard must "
                "be that dimension divided by 2 and every other dimension "
                "whole, but dimension 0 further divided by the 2 ranks of "
                "the dp axis (dp_rows)");
  plan::Plan dp = shardedHead(1, plan::DP, 0, {512, 16});
  dp.mutable_mesh()->set_dp(2);
  for (const char *suffix : {"", ".exp_avg", ".exp_avg_sq", ".grad"})
    named(dp, std::string("lm_head.weight") + suffix)
        .mutable_shard()
        ->set_dp_rows(true);
  expectRefused(dp, "(lm_head.weight): a shard along dp with dp_rows; dp_rows "
                    "takes ZeRO's rows of a tensor-parallel part or of an "
                    "expert-parallel share, so its axis is tp or ep");
  // A moment is the same rows as its parameter: without dp_rows its shape
  // would be the whole TP part's.
  plan::Plan p = rowsOfHead(1, {512, 32});
  named(p, "lm_head.weight.exp_avg").mutable_shard()->set_dp_rows(false);
  expectRefused(p, "(lm_head.weight.exp_avg) has shape [256, 16] but is a "
                   "shard of [512, 32] along dimension 1 over the 2 ranks of "
                   "a tp group");
}

// ZeRO over an expert-parallel share: at DP 4 with EP 2 the EDP group (the
// ranks that hold the same experts) has 2 ranks, so a share [512, 16] of
// [1024, 16] is cut into rows [256, 16] over EDP, not over DP's 4.
TEST(TensorParallelLoader, DpRowsOfAnExpertShareAreCutOverEdp) {
  auto rowsOfShare = [](std::vector<int64_t> global) {
    plan::Plan p = shardedHead(1, plan::EP, 0, std::move(global));
    p.mutable_mesh()->set_dp(4);
    p.mutable_mesh()->set_ep(2);
    for (const char *suffix : {"", ".exp_avg", ".exp_avg_sq", ".grad"})
      named(p, std::string("lm_head.weight") + suffix)
          .mutable_shard()
          ->set_dp_rows(true);
    return p;
  };
  EXPECT_TRUE(loadOnCpu(rowsOfShare({1024, 16})).ok())
      << loadOnCpu(rowsOfShare({1024, 16}));
  expectRefused(rowsOfShare({2048, 16}),
                "has shape [256, 16] but is a shard of [2048, 16] along "
                "dimension 0 over the 2 ranks of a ep group: the shard must "
                "be that dimension divided by 2 and every other dimension "
                "whole, but dimension 0 further divided by the 2 ranks of "
                "the edp axis (dp_rows)");
}

TEST(TensorParallelLoader, TheMeshMayHaveTpAndCp) {
  plan::Plan p = test::tinyModelPlan();
  p.mutable_mesh()->set_tp(4);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  p.mutable_mesh()->set_cp(2);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  p.mutable_mesh()->set_cp(0);
  expectRefused(p, "plan.mesh.cp is 0: a mesh axis has 1 to 2^24 ranks");
}

// ---------------------------------------------------------------------------
// The loader: the collectives of tensor parallelism.

struct Ids {
  uint32_t x = 0;     // f32 activation [4, 8]
  uint32_t xb = 0;    // bf16 activation [4, 8]
  uint32_t xi = 0;    // i32 activation [4, 8]
  uint32_t part = 0;  // bf16 activation [2, 8]
  uint32_t whole = 0; // bf16 activation [2 * tp, 8]
  uint32_t wide = 0;  // bf16 activation [2, 8 * tp]
  uint32_t grad = 0;  // f32 gradient [4]
  uint32_t next = 0;  // f32 activation [4, 8], x's shape
};

// A plan on a mesh of `tp` (and `dp`) whose step writes the activations
// (all but `whole`, which the collectives may write),
// runs `emit`'s collectives (on `stream`, handed to and back from stream 0
// by events when it is not 0), and reads the activations, in a Repeat body
// with `repeated`.
plan::Plan collectivePlan(
    const std::function<void(test::PlanBuilder &, const Ids &)> &emit,
    int64_t tp = 2, uint32_t stream = 0, bool repeated = false,
    const std::function<void(test::PlanBuilder &, Ids &)> &adjust = {}) {
  test::PlanBuilder b;
  b.plan().mutable_mesh()->set_tp(tp);
  b.plan().mutable_mesh()->set_dp(2);
  b.plan().set_num_streams(stream + 1);
  b.standardInputsAndScalars();
  const uint32_t w = b.parameter("w", {4}, plan::ONES);
  Ids ids;
  ids.x = b.tensor("x", {4, 8}, plan::F32, plan::ACTIVATION);
  ids.xb = b.tensor("xb", {4, 8}, plan::BF16, plan::ACTIVATION);
  ids.xi = b.tensor("xi", {4, 8}, plan::I32, plan::ACTIVATION);
  ids.part = b.tensor("part", {2, 8}, plan::BF16, plan::ACTIVATION);
  ids.whole = b.tensor("whole", {2 * tp, 8}, plan::BF16, plan::ACTIVATION);
  ids.wide = b.tensor("wide", {2, 8 * tp}, plan::BF16, plan::ACTIVATION);
  ids.grad = b.grad(w);
  ids.next = b.tensor("next", {4, 8}, plan::F32, plan::ACTIVATION);
  if (adjust)
    adjust(b, ids);
  if (repeated)
    b.beginRepeat(1);
  b.beginMicroBatch(0);
  b.launch("step", 0, "test.touch", {},
           {ids.x, ids.xb, ids.xi, ids.part, ids.wide, ids.grad, ids.next});
  if (stream != 0) {
    b.record("step", 0, 0, 1);
    b.wait("step", stream, 0, 1);
  }
  emit(b, ids);
  if (stream != 0) {
    b.record("step", stream, 1, 1);
    b.wait("step", 0, 1, 1);
  }
  b.launch("step", 0, "test.touch",
           {ids.x, ids.xb, ids.xi, ids.part, ids.whole, ids.wide, ids.grad,
            ids.next},
           {});
  b.endMicroBatch();
  if (repeated)
    b.endRepeat();
  b.finishStep();
  return b.build();
}

TEST(TensorParallelLoader, AcceptsTheCollectivesOfTensorParallelism) {
  auto sumsAndGathers = [](uint32_t stream) {
    return [stream](test::PlanBuilder &b, const Ids &ids) {
      b.collective(stream, plan::ALL_REDUCE_SUM, plan::TP, {ids.x, ids.xb});
      b.collective(stream, plan::ALL_GATHER, plan::TP, {ids.part}, {ids.whole});
    };
  };
  for (int64_t tp : {1, 2, 4}) {
    SCOPED_TRACE(absl::StrCat("tp ", tp));
    // On stream 0, on another stream (ordered by events), and inside the
    // Repeat body of the micro-batches.
    plan::Plan p = collectivePlan(sumsAndGathers(0), tp);
    EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
    p = collectivePlan(sumsAndGathers(1), tp, 1);
    EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
    p = collectivePlan(sumsAndGathers(0), tp, 0, true);
    EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  }
  // A gathered part that is a shard along TP on dimension 0 in one block.
  plan::Plan p = collectivePlan(
      [](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part}, {ids.whole});
      },
      2, 0, false,
      [](test::PlanBuilder &b, Ids &ids) {
        setShard(*b.plan().mutable_tensors(ids.part), plan::TP, 0, {4, 8});
      });
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  // Sequence parallel's reduce-scatter sums bf16 activations too.
  p = collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
    b.collective(0, plan::REDUCE_SCATTER_SUM, plan::TP, {ids.xb}, {ids.part});
  });
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  // Gradients and scalars still sum along any axis.
  p = collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
    b.collective(0, plan::ALL_REDUCE_SUM, plan::TP, {ids.grad});
    b.collective(0, plan::ALL_REDUCE_SUM, plan::DP, {ids.grad});
  });
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
}

// Context parallel's collectives: ring steps (shifts along cp, inside the
// micro-batches) and the gradient sums over its DP x CP group.
TEST(ContextParallelLoader, AcceptsRingStepsAndTheGradientGroup) {
  auto onCp = [](test::PlanBuilder &b, Ids &) {
    b.plan().mutable_mesh()->set_cp(4);
  };
  // (The body also gathers `whole` along TP, which its end reads.)
  auto ring = [](test::PlanBuilder &b, const Ids &ids) {
    b.collective(0, plan::SHIFT, plan::CP, {ids.x}, {ids.next}, 1);
    b.collective(0, plan::SHIFT, plan::CP, {ids.next}, {ids.x}, -3);
    b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part}, {ids.whole});
  };
  plan::Plan p = collectivePlan(ring, 2, 0, true, onCp);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  p = collectivePlan(
      [](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_REDUCE_SUM, plan::DP_CP, {ids.grad});
      },
      2, 0, false, onCp);
  EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
}

TEST(ContextParallelLoader, RefusesShiftsItDoesNotMake) {
  auto onCp = [](test::PlanBuilder &b, Ids &) {
    b.plan().mutable_mesh()->set_cp(2);
  };
  auto shift = [&](uint32_t Ids::*in, uint32_t Ids::*out, int32_t offset,
                   plan::CollectiveKind kind = plan::SHIFT) {
    return collectivePlan(
        [=](test::PlanBuilder &b, const Ids &ids) {
          b.collective(0, kind, plan::CP, {ids.*in}, {ids.*out}, offset);
        },
        2, 0, true, onCp);
  };
  expectRefused(shift(&Ids::x, &Ids::next, 0),
                "the collective's shift_offset is 0; a shift along cp (2 "
                "ranks) moves 1 to 1 places either way");
  expectRefused(shift(&Ids::x, &Ids::next, -2),
                "the collective's shift_offset is -2; a shift along cp");
  expectRefused(shift(&Ids::part, &Ids::whole, 1, plan::ALL_GATHER),
                "the collective's shift_offset is 1; only a SHIFT has one");
  expectRefused(shift(&Ids::x, &Ids::xb, 1),
                "shifts plan.tensors[10] (x) (ACTIVATION f32 [4, 8]) into "
                "plan.tensors[11] (xb) (ACTIVATION bf16 [4, 8]); a shift "
                "moves an ACTIVATION into another of the same dtype and "
                "shape");
  expectRefused(shift(&Ids::grad, &Ids::next, 1),
                "(GRADIENT f32 [4]) into plan.tensors[16] (next)");
  // The gradient group sums once per step, after the micro-batches.
  expectRefused(
      collectivePlan(
          [](test::PlanBuilder &b, const Ids &ids) {
            b.collective(0, plan::ALL_REDUCE_SUM, plan::DP_CP, {ids.grad});
          },
          2, 0, true, onCp),
      "a collective along the dp_cp axis inside a Repeat body");
}

// Expert parallel's exchanges: along ep, inside the micro-batches, rows of
// activations moved by i32 counts of the group (G x G x m: 32 = 2 x 2 x 8).
TEST(ExpertParallelLoader, AcceptsTheExchangesAlongEpOnly) {
  auto onEp = [](test::PlanBuilder &b, Ids &) {
    b.plan().mutable_mesh()->set_ep(2);
  };
  auto exchange = [&](plan::CollectiveKind kind, plan::MeshAxis axis,
                      uint32_t Ids::*counts, uint32_t Ids::*out) {
    return collectivePlan(
        // (The body also gathers `whole` along TP, which its end reads.)
        [=](test::PlanBuilder &b, const Ids &ids) {
          b.collective(0, kind, axis, {ids.x, ids.*counts}, {ids.*out});
          b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part},
                       {ids.whole});
        },
        1, 0, true, onEp);
  };
  for (plan::CollectiveKind kind : {plan::DISPATCH, plan::COMBINE}) {
    plan::Plan p = exchange(kind, plan::EP, &Ids::xi, &Ids::next);
    EXPECT_TRUE(loadOnCpu(p).ok()) << loadOnCpu(p);
  }
  expectRefused(exchange(plan::DISPATCH, plan::TP, &Ids::xi, &Ids::next),
                "a DISPATCH runs along EP, not TP");
  expectRefused(exchange(plan::COMBINE, plan::EP, &Ids::xb, &Ids::next),
                "must be an i32 ACTIVATION of G x G x m counts (G = 2");
  expectRefused(exchange(plan::DISPATCH, plan::EP, &Ids::xi, &Ids::xb),
                "both must be activations of one dtype and the same row "
                "shape");
  // Hot-expert replication's collectives: f32 stacked experts and one i32
  // hot expert per replica, along ep (plans that have them load in
  // test/mpi/moe-replication.test).
  expectRefused(exchange(plan::REPLICATE_EXPERTS, plan::TP, &Ids::xi,
                         &Ids::next),
                "a REPLICATE_EXPERTS runs along EP, reads two tensors (the "
                "experts and the hot experts)");
  expectRefused(exchange(plan::REDUCE_REPLICAS, plan::EP, &Ids::xi,
                         &Ids::next),
                "the hot experts of a REDUCE_REPLICAS, plan.tensors[12] (xi), "
                "must be an i32 ACTIVATION [4], one per replica");
  expectRefused(exchange(plan::REPLICATE_EXPERTS, plan::EP, &Ids::xi,
                         &Ids::xb),
                "a REPLICATE_EXPERTS moves f32 stacked experts");
  // EP splits the DP ranks.
  plan::Plan odd = exchange(plan::DISPATCH, plan::EP, &Ids::xi, &Ids::next);
  odd.mutable_mesh()->set_ep(3);
  expectRefused(odd, "plan.mesh.ep is 3: expert parallel groups divide the 2 "
                     "data-parallel ranks");
}

TEST(TensorParallelLoader, RefusesCollectivesTensorParallelismDoesNotMake) {
  // Activations sum along TP, in f32 or bf16, and along CP in f32 only.
  expectRefused(
      collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_REDUCE_SUM, plan::DP, {ids.x});
      }),
      "instruction 3: sums ACTIVATION plan.tensors[10] (x) along the dp "
      "axis; an all-reduce sums activations along tp (tensor parallelism's "
      "partial sums) and f32 ones along cp (an MoE block's expert counts), "
      "gradients and scalars along any axis");
  expectRefused(
      collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_REDUCE_SUM, plan::CP, {ids.xb});
      }),
      "along the cp axis; an all-reduce sums activations along tp");
  expectRefused(
      collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_REDUCE_SUM, plan::TP, {ids.xi});
      }),
      "(xi) is ACTIVATION i32; an all-reduce sums f32 GRADIENT and SCALAR "
      "tensors, and f32 or bf16 ACTIVATION tensors along tp");
  // An all-gather's output is the group's parts stacked on dimension 0.
  expectRefused(
      collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
        b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part}, {ids.wide});
      }),
      "(part) is bf16 [2, 8] and its output plan.tensors[15] (wide) is bf16 "
      "[2, 16]; an all-gather's output must have the same dtype and 2 times "
      "the first dimension (the group's size along tp)");
  expectRefused(collectivePlan([](test::PlanBuilder &b, const Ids &ids) {
                  b.collective(0, plan::ALL_GATHER, plan::TP, {ids.x},
                               {ids.whole});
                }),
                "must have the same dtype and 2 times the first dimension");
  // A shard the stacking does not make.
  expectRefused(
      collectivePlan(
          [](test::PlanBuilder &b, const Ids &ids) {
            b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part},
                         {ids.whole});
          },
          2, 0, false,
          [](test::PlanBuilder &b, Ids &ids) {
            setShard(*b.plan().mutable_tensors(ids.part), plan::TP, 1, {2, 16});
          }),
      "input plan.tensors[13] (part) is a shard along the tp axis, dimension "
      "1, in 1 blocks, but a collective along tp stacks its group's parts "
      "along dimension 0 in rank order: only a shard along tp, dimension 0, "
      "in one block, is such a part");
  expectRefused(collectivePlan(
                    [](test::PlanBuilder &b, const Ids &ids) {
                      b.collective(0, plan::ALL_GATHER, plan::TP, {ids.part},
                                   {ids.whole});
                    },
                    2, 0, false,
                    [](test::PlanBuilder &b, Ids &ids) {
                      setShard(*b.plan().mutable_tensors(ids.part), plan::TP, 0,
                               {4, 8}, 2);
                    }),
                "dimension 0, in 2 blocks, but a collective along tp stacks");
  // A Repeat body holds collectives along TP only.
  expectRefused(
      collectivePlan(
          [](test::PlanBuilder &b, const Ids &ids) {
            b.collective(0, plan::ALL_REDUCE_SUM, plan::DP, {ids.grad});
          },
          2, 0, true),
      "a collective along the dp axis inside a Repeat body; a body holds "
      "launches, stages, readbacks and collectives along tp, cp and ep only");
  // A collective on another stream races with stream 0 unless ordered.
  expectRefused(
      [] {
        plan::Plan p = collectivePlan(
            [](test::PlanBuilder &b, const Ids &ids) {
              b.collective(1, plan::ALL_REDUCE_SUM, plan::TP, {ids.x});
            },
            2, 1);
        // Drop the wait that orders the collective after the write.
        plan::Program &step = *p.mutable_programs(0);
        for (int i = 0; i < step.instructions_size(); ++i)
          if (step.instructions(i).has_wait() &&
              step.instructions(i).stream() == 1) {
            step.mutable_instructions()->DeleteSubrange(i, 1);
            break;
          }
        return p;
      }(),
      "instructions 2 (launch test.touch, stream 0) and 4 (collective, stream "
      "1) both use plan.tensors[10] (x), and at least one writes it, but no "
      "event orders them");
}

} // namespace
} // namespace braid
