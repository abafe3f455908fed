//===- Offload.cpp - braid-offload ----------------------------------------===//
//
// Activation offload (docs/memory.md "Activation offload"). A saved
// activation of a chosen layer (a buffer a forward launch of the layer
// writes and a backward launch reads) goes to host memory between the two:
//
//   forward stream      ...last forward use of X; record F=f
//   copy-out stream     wait F=f; copy X -> H; record O=o
//   forward stream      ...the next layer's forward...; wait O=o  (X free)
//   backward stream     record B=b  (where the layer above starts its
//                       backward: one layer of prefetch)
//   copy-in stream      wait B=b; wait O=o; copy H -> X'; record I=i
//   backward stream     ...; wait I=i; first backward use, reading X'
//
// H is a host buffer (`sched.alloc host`, planned in the host arena) and X'
// a device buffer of X's type that the backward launches read instead of X:
// X is live over the forward, X' over the backward, and between the two the
// bytes are on the host. Every wait follows its record in program order.
// Copies out and copies in run on two streams of their own, the first two
// the rank does not use, so that a forward never waits, through a copy
// stream, for a backward that runs beside it (DualPipeV's FB pairs).
//
// A step stated once per micro-batch in a sched.repeat (one rank, no
// pipeline) whose body holds a buffer to offload is first stated out,
// micro-batch by micro-batch, since events are not allowed in a repeat's
// body.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include <map>
#include <set>

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include "compiler/spec/OffloadTargets.h"
#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedOps.h"
#include "passes/MemoryComparison.h"
#include "passes/PipelineAttrs.h"
#include "passes/analysis/Unroll.h"

namespace braid {
#define GEN_PASS_DEF_OFFLOADPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

bool isForward(Operation *op) { return phaseMark(op) == Phase::Forward; }

int64_t microBatchOf(sched::LaunchOp launch) {
  return launch.getMicroBatch() ? static_cast<int64_t>(*launch.getMicroBatch())
                                : 0;
}

// The block layer of `op`, or -1 (embedding, loss, no mark).
int64_t blockLayer(Operation *op) {
  LayerAttr layer = layerMark(op);
  return layer && layer.isBlock() ? layer.getIndex() : -1;
}

// One saved activation to offload.
struct Candidate {
  mutable sched::AllocOp alloc; // ops are handles: using one changes nothing
  Operation *writer = nullptr;
  int64_t layer = 0;      // the writer's
  int64_t microBatch = 0;
  uint32_t forwardStream = 0, backwardStream = 0;
  size_t lastForward = 0;   // index of its last forward use
  size_t firstBackward = 0; // index of its first backward use
};

// A record some other stream waits for, numbered once every op is in place.
struct Signal {
  uint32_t event = 0;
  Operation *record = nullptr;
  SmallVector<Operation *> waits;
};

class Offloader {
public:
  Offloader(ModuleOp module, sched::ProgramOp step,
            const std::set<int64_t> &layers)
      : module_(module), step_(step), layers_(layers),
        b_(module.getContext()) {}

  void run();

private:
  bool repeatsHoldCandidates();
  void stateOutRepeats();
  void collectOps(Block &block);
  std::vector<Candidate> findCandidates();
  size_t prefetchPoint(const Candidate &c) const;
  size_t releasePoint(const Candidate &c) const;
  void assignEvents();
  Operation *record(uint32_t stream, Signal &signal);
  Operation *wait(uint32_t stream, Signal &signal);
  void numberSignals();

  ModuleOp module_;
  sched::ProgramOp step_;
  const std::set<int64_t> &layers_;
  OpBuilder b_;
  std::vector<Operation *> ops_; // the step's ops in program order
  llvm::DenseMap<Operation *, size_t> index_;
  uint32_t copyOutStream_ = 0, copyInStream_ = 0;
  uint32_t nextEvent_ = 0;
  std::map<uint32_t, uint32_t> eventOfStream_; // recording stream -> event
  std::vector<std::unique_ptr<Signal>> signals_;
};

void Offloader::stateOutRepeats() {
  SmallVector<sched::RepeatOp> repeats(
      step_.getBody().front().getOps<sched::RepeatOp>());
  for (sched::RepeatOp r : repeats) {
    b_.setInsertionPoint(r);
    for (uint32_t i = 0; i < r.getCount(); ++i) {
      IRMapping map;
      cloneIteration(b_, r, i, map);
    }
    r.erase();
  }
}

// Whether a sched.repeat of the step holds a buffer to offload (its
// buffers are its body's own, so the body alone tells).
bool Offloader::repeatsHoldCandidates() {
  for (auto r : step_.getBody().front().getOps<sched::RepeatOp>()) {
    collectOps(r.getBody().front());
    if (!findCandidates().empty())
      return true;
  }
  return false;
}

void Offloader::collectOps(Block &block) {
  ops_.clear();
  index_.clear();
  for (Operation &op : block) {
    index_[&op] = ops_.size();
    ops_.push_back(&op);
  }
}

// Buffers a forward launch of a chosen layer writes first and backward
// launches read later, used by launches only (no transfer, collective or
// view), each half on one stream.
std::vector<Candidate> Offloader::findCandidates() {
  std::vector<Candidate> found;
  for (Operation *op : ops_) {
    auto alloc = dyn_cast<sched::AllocOp>(op);
    if (!alloc || alloc.getHost())
      continue;
    SmallVector<sched::LaunchOp> users;
    bool onlyLaunches = true;
    for (Operation *user : alloc.getResult().getUsers()) {
      auto launch = dyn_cast<sched::LaunchOp>(user);
      if (!launch) {
        onlyLaunches = false;
        break;
      }
      users.push_back(launch);
    }
    if (!onlyLaunches || users.empty())
      continue;
    llvm::sort(users, [&](sched::LaunchOp a, sched::LaunchOp b) {
      return index_.lookup(a) < index_.lookup(b);
    });
    sched::LaunchOp writer = users.front();
    if (!isForward(writer) ||
        !llvm::is_contained(writer.getOuts(), alloc.getResult()))
      continue;
    Candidate c;
    c.alloc = alloc;
    c.writer = writer;
    c.layer = blockLayer(writer);
    c.microBatch = microBatchOf(writer);
    c.forwardStream = writer.getStream();
    if (c.layer < 0 || !layers_.count(c.layer))
      continue;
    bool ok = true, inBackward = false;
    for (sched::LaunchOp user : users) {
      ok = ok && microBatchOf(user) == c.microBatch;
      if (isForward(user)) {
        // Every forward use comes before every backward one.
        ok = ok && !inBackward && user.getStream() == c.forwardStream;
        c.lastForward = index_.lookup(user);
      } else if (isBackwardPhase(user)) {
        if (!inBackward) {
          c.backwardStream = user.getStream();
          c.firstBackward = index_.lookup(user);
        }
        inBackward = true;
        ok = ok && user.getStream() == c.backwardStream;
      } else {
        ok = false;
      }
    }
    if (ok && inBackward)
      found.push_back(c);
  }
  return found;
}

// Where the backward stream starts the copy back: at the first backward
// launch of the micro-batch for the layer above the one that first reads
// the buffer (one layer ahead), else at the micro-batch's first backward
// launch on that stream, but never after the first read.
size_t Offloader::prefetchPoint(const Candidate &c) const {
  const int64_t reader = blockLayer(ops_[c.firstBackward]);
  std::optional<size_t> above, first;
  for (size_t i = c.lastForward + 1; i < c.firstBackward; ++i) {
    auto launch = dyn_cast<sched::LaunchOp>(ops_[i]);
    if (!launch || launch.getStream() != c.backwardStream ||
        !isBackwardPhase(launch) || microBatchOf(launch) != c.microBatch)
      continue;
    if (!first)
      first = i;
    if (!above && reader >= 0 && blockLayer(launch) == reader + 1)
      above = i;
  }
  return above ? *above : first ? *first : c.firstBackward;
}

// Where the forward stream waits for the copy out, after which the
// buffer's bytes are free: at its next launch that is not the forward of
// the layer that last read the buffer or of the one after it, in the same
// micro-batch (so the copy runs beside the next layer's forward), else at
// the end of the program.
size_t Offloader::releasePoint(const Candidate &c) const {
  const int64_t lastReader = blockLayer(ops_[c.lastForward]);
  for (size_t i = c.lastForward + 1; i < ops_.size(); ++i) {
    auto launch = dyn_cast<sched::LaunchOp>(ops_[i]);
    if (!launch || launch.getStream() != c.forwardStream)
      continue;
    const int64_t layer = blockLayer(launch);
    if (!isForward(launch) || microBatchOf(launch) != c.microBatch ||
        layer < 0 || lastReader < 0 || layer > lastReader + 1)
      return i;
  }
  return ops_.size();
}

Operation *Offloader::record(uint32_t stream, Signal &signal) {
  auto [it, fresh] = eventOfStream_.try_emplace(stream, nextEvent_);
  if (fresh)
    ++nextEvent_;
  signal.event = it->second;
  signal.record = sched::EventRecordOp::create(
      b_, module_.getLoc(), b_.getI32IntegerAttr(signal.event),
      b_.getI64IntegerAttr(0), b_.getI32IntegerAttr(stream));
  return signal.record;
}

Operation *Offloader::wait(uint32_t stream, Signal &signal) {
  Operation *op = sched::EventWaitOp::create(
      b_, module_.getLoc(), b_.getI32IntegerAttr(signal.event),
      b_.getI64IntegerAttr(0), b_.getI32IntegerAttr(stream));
  signal.waits.push_back(op);
  return op;
}

// Each event's records get the values 1, 2, ... in program order, and each
// wait its record's.
void Offloader::numberSignals() {
  llvm::DenseMap<Operation *, Signal *> byRecord;
  for (auto &s : signals_)
    byRecord[s->record] = s.get();
  std::map<uint32_t, int64_t> next;
  for (Operation &op : step_.getBody().front()) {
    auto it = byRecord.find(&op);
    if (it == byRecord.end())
      continue;
    Signal &s = *it->second;
    const int64_t value = ++next[s.event];
    s.record->setAttr("value", b_.getI64IntegerAttr(value));
    for (Operation *w : s.waits)
      w->setAttr("value", b_.getI64IntegerAttr(value));
  }
}

void Offloader::run() {
  if (repeatsHoldCandidates())
    stateOutRepeats();
  collectOps(step_.getBody().front());
  // The copy streams and the events: the first the rank leaves free.
  const sched::FreeIds free = sched::firstFree(module_);
  copyOutStream_ = free.stream;
  copyInStream_ = free.stream + 1;
  nextEvent_ = free.event;

  std::vector<Candidate> candidates = findCandidates();
  if (candidates.empty())
    return;

  // The buffers of each copy group: copies out by the op after which they
  // start (the last forward use), copies in by the op before which they
  // start (the prefetch point).
  std::map<size_t, std::vector<const Candidate *>> outs, ins;
  for (const Candidate &c : candidates) {
    outs[c.lastForward].push_back(&c);
    ins[prefetchPoint(c)].push_back(&c);
  }
  auto signal = [&]() {
    signals_.push_back(std::make_unique<Signal>());
    return signals_.back().get();
  };

  // The buffers: H beside X, and X' for the backward.
  llvm::DenseMap<Operation *, Value> host, back;
  for (const Candidate &c : candidates) {
    b_.setInsertionPointAfter(c.alloc);
    auto type = cast<MemRefType>(c.alloc.getType());
    Value h = sched::AllocOp::create(b_, c.alloc.getLoc(), type, IntegerAttr(),
                                     /*host=*/true);
    Value x2 =
        sched::AllocOp::create(b_, c.alloc.getLoc(), type, IntegerAttr());
    host[c.alloc] = h;
    back[c.alloc] = x2;
    Value x = c.alloc.getResult();
    x.replaceUsesWithIf(x2, [&](OpOperand &use) {
      return isBackwardPhase(use.getOwner());
    });
  }

  auto copy = [&](const Candidate &c, Value from, Value to, Phase phase) {
    auto launch = sched::LaunchOp::create(
        b_, module_.getLoc(), b_.getStringAttr("copy"),
        b_.getI32IntegerAttr(phase == Phase::Forward ? copyOutStream_
                                                     : copyInStream_),
        b_.getI32IntegerAttr(static_cast<int32_t>(c.microBatch)),
        ValueRange{from}, ValueRange{to}, DictionaryAttr());
    // A copy out counts for the layer that wrote the buffer, a copy in for
    // the one that reads it first.
    copyMarks(phase == Phase::Forward ? c.writer : ops_[c.firstBackward],
              launch);
    setPhaseMark(launch, phase);
  };

  // One group's copies on `copyStream`, at the builder's insertion point:
  // `trigger` records, the copy stream waits for that and for `after`,
  // copies, and records the signal it returns.
  auto copyGroup = [&](const std::vector<const Candidate *> &group,
                       uint32_t trigger, uint32_t copyStream,
                       ArrayRef<Signal *> after, Phase phase) {
    Signal *started = signal();
    record(trigger, *started);
    wait(copyStream, *started);
    for (Signal *s : after)
      wait(copyStream, *s);
    for (const Candidate *c : group) {
      if (phase == Phase::Forward)
        copy(*c, c->alloc.getResult(), host[c->alloc], phase);
      else
        copy(*c, host[c->alloc], back[c->alloc], phase);
    }
    Signal *done = signal();
    record(copyStream, *done);
    return done;
  };

  // The waits each op gets before it, with the waiting stream, in order:
  // the forward stream frees each buffer once its copy is out, the
  // backward stream reads each copy back once it is in.
  std::map<size_t, SmallVector<std::pair<Signal *, uint32_t>>> waitsBefore;
  // Copies out, after the last forward use of their buffers, on a stream
  // that waits for forward streams only: a forward never waits for a
  // backward's progress (in an FB pair, for its gradient) through them.
  llvm::DenseMap<Operation *, Signal *> outDone;
  for (auto &[at, group] : outs) {
    const uint32_t stream = group.front()->forwardStream;
    b_.setInsertionPointAfter(ops_[at]);
    Signal *done = copyGroup(group, stream, copyOutStream_, {}, Phase::Forward);
    for (const Candidate *c : group) {
      waitsBefore[releasePoint(*c)].push_back({done, stream});
      outDone[c->alloc] = done;
    }
  }
  // Copies back, one layer ahead of the first backward use, on a stream of
  // their own, each after its buffer's copy out.
  for (auto &[at, group] : ins) {
    const uint32_t stream = group.front()->backwardStream;
    b_.setInsertionPoint(ops_[at]);
    llvm::SetVector<Signal *> out;
    for (const Candidate *c : group)
      out.insert(outDone.lookup(c->alloc));
    Signal *done = copyGroup(group, stream, copyInStream_, out.getArrayRef(),
                             Phase::InputGrad);
    for (const Candidate *c : group)
      waitsBefore[c->firstBackward].push_back({done, stream});
  }
  // A group's buffers share one wait.
  for (auto &[at, waits] : waitsBefore) {
    llvm::SmallPtrSet<Signal *, 4> seen;
    for (auto [s, stream] : waits) {
      if (!seen.insert(s).second)
        continue;
      if (at == ops_.size())
        b_.setInsertionPointToEnd(&step_.getBody().front());
      else
        b_.setInsertionPoint(ops_[at]);
      wait(stream, *s);
    }
  }
  numberSignals();
}

struct OffloadPass : impl::OffloadPassBase<OffloadPass> {
  using OffloadPassBase::OffloadPassBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    std::string text = targets;
    if (text.empty())
      if (auto attr = top->getAttrOfType<StringAttr>(BraidDialect::kOffloadAttr))
        text = attr.str();
    if (text.empty() || text == "none")
      return;
    absl::StatusOr<OffloadTargets> parsed = parseOffloadTargets(text);
    if (!parsed.ok()) {
      top.emitError("braid-offload: ")
          << std::string(parsed.status().message());
      return signalPassFailure();
    }
    // The optimizer is braid-offload-optimizer's.
    if (parsed->noActivations())
      return;
    FailureOr<std::set<int64_t>> layers = resolveLayers(top, *parsed);
    if (failed(layers))
      return signalPassFailure();
    // What the arena would be without: for the memory report's saving.
    std::vector<MemoryFigures> without;
    if (compare) {
      FailureOr<std::vector<MemoryFigures>> planned =
          planAsItIs(top, "braid-offload");
      if (failed(planned))
        return signalPassFailure();
      without = std::move(*planned);
    }
    SmallVector<ModuleOp> ranks = rankModules(top);
    for (ModuleOp module : ranks)
      for (auto program : module.getOps<sched::ProgramOp>())
        if (program.getKind() == sched::ProgramKind::Step)
          Offloader(module, program, *layers).run();
    writeReport(top, text, ranks.size(), without);
  }

  // One dictionary per rank: the targets and, when planned, the arena and
  // the saved activations without offload.
  static void writeReport(ModuleOp top, const std::string &text,
                          size_t numRanks,
                          const std::vector<MemoryFigures> &without) {
    Builder b(top.getContext());
    SmallVector<Attribute> entries;
    for (size_t r = 0; r < numRanks; ++r) {
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("targets", b.getStringAttr(text))};
      if (r < without.size()) {
        entry.push_back(b.getNamedAttr(
            "arena_without", b.getI64IntegerAttr(without[r].arena)));
        entry.push_back(b.getNamedAttr(
            "saved_without", b.getI64IntegerAttr(without[r].savedActivations)));
      }
      entries.push_back(b.getDictionaryAttr(entry));
    }
    top->setAttr(BraidDialect::kOffloadReportAttr, b.getArrayAttr(entries));
  }

  // The model layers the targets name: every layer, the listed ones, and
  // the layers of the listed pipeline stages, each of which must exist
  // (the spec's rule says the same of compile.offload).
  FailureOr<std::set<int64_t>> resolveLayers(ModuleOp top,
                                             const OffloadTargets &t) {
    int64_t numLayers = 0;
    if (auto model = top->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr))
      numLayers = model.getNumLayers();
    pipeline::Partition partition;
    if (absl::StatusOr<pipeline::Partition> p = readPartition(top); p.ok())
      partition = *p;
    else
      partition.stages.push_back({0, numLayers, 0, true, true});
    const auto &stages = partition.stages;
    if (absl::Status s = checkOffloadTargetsExist(
            t, numLayers, static_cast<int64_t>(stages.size()),
            partition.placement.ranks);
        !s.ok()) {
      top.emitError("braid-offload: ") << std::string(s.message());
      return failure();
    }
    std::set<int64_t> layers(t.layers.begin(), t.layers.end());
    if (t.allLayers)
      for (int64_t l = 0; l < numLayers; ++l)
        layers.insert(l);
    for (int64_t s : t.stages)
      for (int64_t l = 0; l < stages[s].layers; ++l)
        layers.insert(stages[s].first + l);
    return layers;
  }
};

} // namespace
} // namespace braid
