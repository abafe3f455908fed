//===- SchedOps.cpp - sched dialect ops -----------------------------------===//
#include "dialects/sched/SchedOps.h"

#include "runtime/plan/StreamOrder.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace braid::sched;

// An enum attribute written as its bare keyword (`parameter`, `tokens`,
// `step`) in an op's format, where its own syntax would add a space.
template <typename EnumAttrT>
static ParseResult parseKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  using Enum = decltype(std::declval<EnumAttrT>().getValue());
  FailureOr<Enum> value = FieldParser<Enum>::parse(parser);
  if (failed(value))
    return failure();
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

template <typename EnumAttrT>
static void printKeyword(OpAsmPrinter &printer, Operation *, EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

// The roles of each kind; none for the kinds that take no role.
static ArrayRef<Role> rolesOf(GlobalKind kind) {
  static const Role inputs[] = {Role::Tokens, Role::Labels, Role::Positions};
  static const Role scalars[] = {Role::Loss, Role::LossSum, Role::GradNorm,
                                 Role::StepSkipped};
  if (kind == GlobalKind::Input)
    return inputs;
  if (kind == GlobalKind::Scalar)
    return scalars;
  return {};
}

LogicalResult GlobalOp::verify() {
  GlobalKind kind = getKind();
  // "a gradient", "an input": for messages.
  std::string a =
      (Twine(kind == GlobalKind::OptimizerState || kind == GlobalKind::Input
                 ? "an "
                 : "a ") +
       stringifyGlobalKind(kind))
          .str();
  const bool isParameter = kind == GlobalKind::Parameter;
  const bool belongs = kind == GlobalKind::Gradient ||
                       kind == GlobalKind::OptimizerState ||
                       kind == GlobalKind::WeightCopy;
  // A buffer's accumulator names its buffer; a buffer itself names none.
  const bool mayBelong = belongs || kind == GlobalKind::Buffer;
  ArrayRef<Role> roles = rolesOf(kind);

  if (isParameter && !getInfo())
    return emitOpError("a parameter needs its info <name = ..., init = ..., "
                       "grad = ..., exp_avg = ..., exp_avg_sq = ...>");
  if (!isParameter && getInfo())
    return emitOpError() << a << " has no info; only parameters do";
  if (belongs && !getOf())
    return emitOpError() << a
                         << " names the parameter it belongs to: `of @NAME`";
  if (!mayBelong && getOf())
    return emitOpError() << a
                         << " belongs to no parameter; only gradients, "
                            "optimizer states, weight copies and buffers' "
                            "accumulators name one";
  if (kind == GlobalKind::Buffer && !getType().getElementType().isF32())
    return emitOpError("a buffer holds f32 values, not ")
           << getType().getElementType();
  if (roles.empty() && getRole())
    return emitOpError() << a << " has no role; only inputs and scalars do";
  if (!roles.empty() && (!getRole() || !llvm::is_contained(roles, *getRole())))
    return emitOpError() << "the role of " << a << " is "
                         << (kind == GlobalKind::Input
                                 ? "tokens, labels or positions"
                                 : "loss, loss_sum, grad_norm or step_skipped")
                         << (getRole() ? ", not " : "")
                         << (getRole() ? stringifyRole(*getRole()) : "");
  if (kind == GlobalKind::WeightCopy &&
      !isa<FloatType>(getType().getElementType()))
    return emitOpError("weight_copy must hold f32 or bf16 values, not ")
           << getType().getElementType();
  if (getHost() && !isParameter && kind != GlobalKind::OptimizerState)
    return emitOpError() << a
                         << " stays on the device; only parameters and "
                            "optimizer states live on the host";
  // I64Attr reads back as uint64_t: compare the signed value.
  if (auto offset = getOffset(); offset && static_cast<int64_t>(*offset) < 0)
    return emitOpError("offset must be non-negative");
  return success();
}

LogicalResult
GetGlobalOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto global =
      symbolTable.lookupNearestSymbolFrom<GlobalOp>(*this, getGlobalAttr());
  if (!global)
    return emitOpError() << "'" << getGlobal()
                         << "' does not name a sched.global";
  if (global.getType() != getType())
    return emitOpError() << "type " << getType()
                         << " differs from the global's " << global.getType();
  return success();
}

LogicalResult AllocOp::verify() {
  if (auto offset = getOffset(); offset && static_cast<int64_t>(*offset) < 0)
    return emitOpError("offset must be non-negative");
  if (getHost()) {
    for (Operation *user : getResult().getUsers()) {
      auto launch = dyn_cast<LaunchOp>(user);
      if (!launch || (launch.getKernel() != "copy" &&
                      !SchedDialect::isHostStream(launch, launch.getStream())))
        return emitOpError("is a host buffer, which only 'copy' launches "
                           "and launches on a host stream "
                           "(sched.host_streams) may read or write; used by ")
               << user->getName()
               << (launch ? " \"" + launch.getKernel().str() + "\"" : "");
    }
  }
  return success();
}

LogicalResult LaunchOp::verify() {
  if (getKernel().empty())
    return emitOpError("needs a kernel name");
  if (getOuts().empty())
    return emitOpError("needs at least one output buffer");
  if (static_cast<int32_t>(getStream()) < 0)
    return emitOpError("stream must be non-negative");
  if (getMicroBatch() && static_cast<int32_t>(*getMicroBatch()) < 0)
    return emitOpError("micro_batch must be non-negative");
  return success();
}

LogicalResult StageOp::verify() {
  if (static_cast<int32_t>(getStream()) < 0 ||
      static_cast<int32_t>(getMicroBatch()) < 0)
    return emitOpError("micro_batch and stream must be non-negative");
  if (!getBuffer().getDefiningOp<GetGlobalOp>())
    return emitOpError("stages into a global (an input), not a transient "
                       "buffer");
  return success();
}

// A pipeline transfer goes to another rank on one of the two channels.
template <typename Op> static LogicalResult verifyTransfer(Op op) {
  if (static_cast<int32_t>(op.getStream()) < 0)
    return op.emitOpError("stream must be non-negative");
  if (op.getPeerOffset() == 0)
    return op.emitOpError("peer_offset must name another pipeline rank, "
                          "not 0");
  if (op.getChannel() > 1)
    return op.emitOpError("channel must be 0 (activations) or 1 "
                          "(gradients)");
  return success();
}

LogicalResult SendOp::verify() { return verifyTransfer(*this); }
LogicalResult RecvOp::verify() { return verifyTransfer(*this); }

LogicalResult MarkOp::verify() {
  if (getPart() != "F" && getPart() != "B" && getPart() != "W")
    return emitOpError() << "part must be \"F\", \"B\" or \"W\", not \""
                         << getPart() << "\"";
  if (static_cast<int32_t>(getStream()) < 0 ||
      static_cast<int32_t>(getStage()) < 0 ||
      static_cast<int32_t>(getMicroBatch()) < 0)
    return emitOpError("stage, micro-batch and stream must be non-negative");
  return success();
}

LogicalResult ReadbackOp::verify() {
  if (static_cast<int32_t>(getStream()) < 0 ||
      static_cast<int32_t>(getSlot()) < 0)
    return emitOpError("slot and stream must be non-negative");
  auto type = cast<MemRefType>(getBuffer().getType());
  if (type.getRank() != 0 || !type.getElementType().isF32())
    return emitOpError() << "reads back an f32 scalar, not " << type;
  if (!getBuffer().getDefiningOp<GetGlobalOp>())
    return emitOpError("reads back a global (a scalar), not a transient "
                       "buffer");
  return success();
}

LogicalResult ViewOp::verify() {
  auto src = cast<MemRefType>(getSource().getType());
  auto view = cast<MemRefType>(getResult().getType());
  const int64_t dim = getDim(), first = getFirst();
  bool fits = src.getElementType() == view.getElementType() &&
              src.getRank() == view.getRank() && dim >= 0 &&
              dim < src.getRank() && first >= 0 &&
              first + view.getDimSize(dim) <= src.getDimSize(dim);
  for (int64_t d = 0; fits && d < src.getRank(); ++d)
    fits = d < dim ? src.getDimSize(d) == 1 && view.getDimSize(d) == 1
                   : d == dim || src.getDimSize(d) == view.getDimSize(d);
  if (!fits)
    return emitOpError() << view << " is not a contiguous slice of " << src
                         << " from index " << first << " of dimension "
                         << dim
                         << " (the dimensions before it must be 1, those "
                            "after it whole)";
  if (getSource().getDefiningOp<ViewOp>())
    return emitOpError("views a view; view the base buffer instead");
  return success();
}

LogicalResult RepeatOp::verify() {
  if (static_cast<int32_t>(getCount()) < 1)
    return emitOpError("repeats at least once");
  for (Operation &op : getBody().front()) {
    // braid-shard's collectives over the TP and CP groups and expert
    // parallel's over EP belong to the micro-batch.
    auto collective = dyn_cast<CollectiveOp>(op);
    if (collective && (collective.getAxis() == MeshAxis::Tp ||
                       collective.getAxis() == MeshAxis::Cp ||
                       collective.getAxis() == MeshAxis::Ep))
      continue;
    if (!isa<LaunchOp, StageOp, ReadbackOp, AllocOp, GetGlobalOp>(op))
      return op.emitOpError("cannot be in a sched.repeat body, which holds "
                            "launches, stages, readbacks, buffers, global "
                            "reads and collectives along tp, cp and ep only");
  }
  return success();
}

LogicalResult CollectiveOp::verify() {
  if (getStream() < 0)
    return emitOpError("stream must be non-negative");
  if (getBuffers().empty())
    return emitOpError("names no buffer");
  if (getKind() == CollectiveKind::AllReduceSum) {
    if (!getOutputs().empty())
      return emitOpError("all_reduce_sum works in place and has no outputs");
    // Along TP the sums are activations' (braid-shard), in transient
    // buffers, and along CP an MoE block's expert counts (f32); along the
    // other axes gradients and scalars, in globals.
    const bool tp = getAxis() == MeshAxis::Tp;
    const bool transientOk = tp || getAxis() == MeshAxis::Cp;
    for (Value b : getBuffers()) {
      auto type = cast<MemRefType>(b.getType());
      auto global = b.getDefiningOp<GetGlobalOp>();
      // bf16 activations (BF16 plans) sum along TP too.
      const bool dtypeOk = type.getElementType().isF32() ||
                           (tp && !global && type.getElementType().isBF16());
      if ((!global && !transientOk) || !dtypeOk)
        return emitOpError()
               << "reduces f32 "
               << (tp ? "or bf16 buffers" : (transientOk ? "buffers" : "globals"))
               << ", not " << type
               << (global || transientOk ? "" : " of a transient buffer");
    }
    return success();
  }
  if (getKind() == CollectiveKind::Dispatch ||
      getKind() == CollectiveKind::Combine) {
    if (getAxis() != MeshAxis::Ep || getBuffers().size() != 2 ||
        getOutputs().size() != 1 || getOffset())
      return emitOpError("dispatch and combine run along ep with two "
                         "buffers (rows, counts) and one output");
    auto rows = cast<MemRefType>(getBuffers()[0].getType());
    auto counts = cast<MemRefType>(getBuffers()[1].getType());
    auto out = cast<MemRefType>(getOutputs()[0].getType());
    if (!counts.getElementType().isInteger(32) ||
        rows.getElementType() != out.getElementType() ||
        rows.getRank() < 1 || rows.getRank() != out.getRank() ||
        rows.getShape().drop_front() != out.getShape().drop_front())
      return emitOpError() << "moves " << rows << " into " << out << " by "
                           << counts
                           << "; rows of one shape and type, i32 counts";
    return success();
  }
  if (getKind() == CollectiveKind::ReplicateExperts ||
      getKind() == CollectiveKind::ReduceReplicas) {
    if (getAxis() != MeshAxis::Ep || getBuffers().size() != 2 ||
        getOutputs().size() != 1 || getOffset())
      return emitOpError("replicate_experts and reduce_replicas run along ep "
                         "with two buffers (weights, hot experts) and one "
                         "output");
    auto data = cast<MemRefType>(getBuffers()[0].getType());
    auto hot = cast<MemRefType>(getBuffers()[1].getType());
    auto out = cast<MemRefType>(getOutputs()[0].getType());
    const bool replicate = getKind() == CollectiveKind::ReplicateExperts;
    const int64_t slots = (replicate ? out : data).getShape().empty()
                              ? -1
                              : (replicate ? out : data).getShape()[0];
    if (!hot.getElementType().isInteger(32) || hot.getRank() != 1 ||
        hot.getShape()[0] != slots ||
        data.getElementType() != out.getElementType() ||
        !data.getElementType().isF32() || data.getRank() < 2 ||
        data.getRank() != out.getRank() ||
        data.getShape().drop_front() != out.getShape().drop_front())
      return emitOpError() << "moves " << data << " into " << out << " by "
                           << hot
                           << "; f32 stacked experts of one shape, one i32 "
                              "hot expert per slot";
    return success();
  }
  if (getOutputs().size() != getBuffers().size())
    return emitOpError() << "has " << getBuffers().size() << " buffers and "
                         << getOutputs().size()
                         << " outputs; each buffer needs one output";
  if (getKind() == CollectiveKind::Shift) {
    if (!getOffset() || *getOffset() == 0)
      return emitOpError("shift needs a non-zero offset");
    for (auto [in, out] : llvm::zip(getBuffers(), getOutputs()))
      if (in.getType() != out.getType() || in == out)
        return emitOpError() << "shifts " << in.getType() << " into "
                             << out.getType()
                             << "; each output is another buffer of its "
                                "buffer's type";
    return success();
  }
  if (getOffset())
    return emitOpError("only shift has an offset");
  const bool gather = getKind() == CollectiveKind::AllGather;
  for (auto [in, out] : llvm::zip(getBuffers(), getOutputs())) {
    auto part = cast<MemRefType>(gather ? in.getType() : out.getType());
    auto whole = cast<MemRefType>(gather ? out.getType() : in.getType());
    bool fits = part.getElementType() == whole.getElementType() &&
                part.getRank() == whole.getRank() && part.getRank() >= 1 &&
                part.getDimSize(0) > 0 &&
                whole.getDimSize(0) % part.getDimSize(0) == 0;
    for (int64_t d = 1; fits && d < part.getRank(); ++d)
      fits = part.getDimSize(d) == whole.getDimSize(d);
    if (!fits)
      return emitOpError() << "moves " << in.getType() << " into "
                           << out.getType() << "; the "
                           << (gather ? "output" : "buffer")
                           << " must be whole rows of the other, stacked "
                              "along dimension 0";
    // Along tp and cp the sums are activations', bf16 in BF16 plans.
    const bool activations =
        getAxis() == MeshAxis::Tp || getAxis() == MeshAxis::Cp;
    if (!gather && !part.getElementType().isF32() &&
        !(activations && part.getElementType().isBF16() &&
          !in.getDefiningOp<GetGlobalOp>()))
      return emitOpError() << "sums f32 buffers"
                           << (activations ? " (or bf16 activations)" : "")
                           << ", not " << in.getType();
  }
  return success();
}

static LogicalResult verifyEventOp(Operation *op, int32_t event, int64_t value,
                                   int32_t stream) {
  if (event < 0 || stream < 0)
    return op->emitOpError("event and stream must be non-negative");
  if (value < 1)
    return op->emitOpError("event values start at 1");
  return success();
}

LogicalResult EventRecordOp::verify() {
  return verifyEventOp(*this, getEvent(), getValue(), getStream());
}

LogicalResult EventWaitOp::verify() {
  return verifyEventOp(*this, getEvent(), getValue(), getStream());
}

// The timeline rules of the plan loader (runtime/plan/StreamOrder.h
// checkEvents), so that a program that breaks them fails here, at the op.
LogicalResult ProgramOp::verifyRegions() {
  std::vector<OrderStep> steps;
  std::vector<Operation *> ops;
  getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto record = dyn_cast<EventRecordOp>(op))
      steps.push_back({static_cast<uint32_t>(record.getStream()),
                       OrderStep::Kind::kRecord,
                       static_cast<uint32_t>(record.getEvent()),
                       static_cast<uint64_t>(record.getValue())});
    else if (auto wait = dyn_cast<EventWaitOp>(op))
      steps.push_back({static_cast<uint32_t>(wait.getStream()),
                       OrderStep::Kind::kWait,
                       static_cast<uint32_t>(wait.getEvent()),
                       static_cast<uint64_t>(wait.getValue())});
    else
      return;
    ops.push_back(op);
  });
  int64_t bad = 0;
  if (std::optional<std::string> why = checkEvents(steps, &bad))
    return ops[bad]->emitOpError() << *why;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.cpp.inc"

FreeIds braid::sched::firstFree(Operation *root) {
  FreeIds free;
  root->walk([&](Operation *op) {
    // Every sched op that runs on a stream names it in `stream`.
    if (auto stream = op->getAttrOfType<IntegerAttr>("stream"))
      free.stream = std::max<uint32_t>(free.stream, stream.getInt() + 1);
    if (auto record = dyn_cast<EventRecordOp>(op))
      free.event = std::max<uint32_t>(free.event, record.getEvent() + 1);
  });
  return free;
}
