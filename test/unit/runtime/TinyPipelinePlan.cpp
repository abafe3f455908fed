#include "test/unit/runtime/TinyPipelinePlan.h"

#include <string>
#include <vector>

#include "test/unit/runtime/PlanBuilder.h"

namespace braid::test {
namespace {

constexpr int64_t kVocab = 256;

// What both stages share: the single-rank plan's header (so that their
// checkpoints belong to it) and the optimizer's tail.
struct Stage {
  const TinyPipelineOptions &o;
  PlanBuilder b;
  // The streams of the compute, of the sends and of the receives.
  uint32_t compute = 0, sends = 0, recvs = 0;
  uint64_t sent = 0, received = 0; // the values of events 0 and 1

  explicit Stage(const TinyPipelineOptions &options) : o(options) {
    const plan::Plan whole = tinyModelPlan(o.model);
    b.plan().set_name(whole.name());
    *b.plan().mutable_model() = whole.model();
    *b.plan().mutable_train() = whole.train();
    b.plan().mutable_mesh()->set_dp(o.dataParallel);
    if (!o.oneStream) {
      sends = 1;
      recvs = 2;
    }
  }
  const std::string step = "step";
  int64_t B() const { return o.model.microBatchSize; }
  int64_t S() const { return o.model.seqLen; }
  int64_t D() const { return o.model.hidden; }
  uint32_t act(const std::string &name, std::vector<int64_t> shape) {
    return b.tensor(name, std::move(shape), plan::F32, plan::ACTIVATION);
  }
  // Stream `to` may use what stream `from` did so far (event `event`).
  void handOff(uint32_t from, uint32_t to, uint32_t event, uint64_t &value) {
    if (from == to)
      return;
    b.record(step, from, event, ++value);
    b.wait(step, to, event, value);
  }
  void zero(const std::vector<uint32_t> &params) {
    for (uint32_t p : params)
      b.launch(step, 0, "fill", {}, {b.grad(p)}, {floatAttr("value", 0)});
    b.launch(step, 0, "fill", {}, {b.plan().loss_sum_tensor()},
             {floatAttr("value", 0)});
  }
  // The gradients summed over DP, the norm of this stage's part gathered
  // over PP into the whole norm, the loss sum over the pipeline (and DP),
  // the guard and AdamW.
  void optimizer(const std::vector<uint32_t> &params) {
    std::vector<uint32_t> grads;
    for (uint32_t p : params)
      grads.push_back(b.grad(p));
    const uint32_t lossSum = b.plan().loss_sum_tensor();
    const uint32_t norm = b.plan().grad_norm_tensor();
    const uint32_t skipped = b.plan().step_skipped_tensor();
    if (o.dataParallel > 1)
      b.collective(0, plan::ALL_REDUCE_SUM, plan::DP, grads);
    const uint32_t mine = act("grad_norm.part", {1});
    const uint32_t parts = act("grad_norm.parts", {2});
    b.launch(step, 0, "grad_norm", grads, {mine});
    b.collective(0, plan::ALL_GATHER, plan::PP, {mine}, {parts});
    b.launch(step, 0, "grad_norm", {parts}, {norm});
    b.collective(0, plan::ALL_REDUCE_SUM, plan::PP, {lossSum});
    if (o.dataParallel > 1)
      b.collective(0, plan::ALL_REDUCE_SUM, plan::DP, {lossSum});
    b.launch(step, 0, "step_guard", {lossSum, norm}, {skipped});
    for (uint32_t p : params)
      b.adamw(p, norm, skipped);
  }
  void scalars() {
    b.plan().set_loss_tensor(b.tensor("loss", {}, plan::F32, plan::SCALAR));
    b.plan().set_loss_sum_tensor(
        b.tensor("loss_sum", {}, plan::F32, plan::SCALAR));
    b.plan().set_grad_norm_tensor(
        b.tensor("grad_norm", {}, plan::F32, plan::SCALAR));
    b.plan().set_step_skipped_tensor(
        b.tensor("step_skipped", {}, plan::F32, plan::SCALAR));
  }
  uint32_t input(const std::string &name, plan::InputRole role) {
    const uint32_t id = b.tensor(name, {B(), S()}, plan::I32, plan::INPUT);
    b.plan().mutable_tensors(id)->set_role(role);
    return id;
  }
};

// Rank 0: the embedding of each micro-batch, sent on; its gradient, received
// back, into the embedding's.
plan::Plan embeddingStage(const TinyPipelineOptions &o) {
  Stage st(o);
  PlanBuilder &b = st.b;
  const uint32_t embed = b.parameter("model.embed_tokens.weight",
                                     {kVocab, st.D()}, plan::NORMAL, 0.5f);
  const uint32_t tokens = st.input("tokens", plan::TOKENS);
  st.scalars();
  st.zero({embed});
  for (int64_t m = 0; m < o.model.numMicroBatches; ++m) {
    const std::string sfx = "." + std::to_string(m);
    const uint32_t x = st.act("x" + sfx, {st.B(), st.S(), st.D()});
    const uint32_t dx = st.act("dx" + sfx, {st.B(), st.S(), st.D()});
    b.computeMicroBatch(static_cast<uint32_t>(m));
    b.stage(0, tokens, static_cast<uint32_t>(m));
    b.launch(st.step, 0, "embedding", {embed, tokens}, {x});
    st.handOff(0, st.sends, 0, st.sent);
    b.send(st.sends, x, +1, 0);
    b.recv(st.recvs, dx, +1, 1);
    st.handOff(st.recvs, 0, 1, st.received);
    b.launch(st.step, 0, "embedding_grad_weight", {dx, tokens}, {b.grad(embed)},
             {intAttr("accumulate", 1)});
  }
  st.optimizer({embed});
  b.finishStep(/*losses=*/false);
  return b.build();
}

// Rank 1: the norm, the LM head and the loss of each micro-batch received,
// and the gradient of its input, sent back.
plan::Plan lossStage(const TinyPipelineOptions &o) {
  Stage st(o);
  PlanBuilder &b = st.b;
  const int64_t B = st.B(), S = st.S(), D = st.D();
  const uint32_t norm = b.parameter("model.norm.weight", {D}, plan::ONES);
  const uint32_t head =
      b.parameter("lm_head.weight", {kVocab, D}, plan::NORMAL, 0.1f);
  const uint32_t labels = st.input("labels", plan::LABELS);
  st.scalars();
  const uint32_t loss = b.plan().loss_tensor();
  st.zero({norm, head});
  const double scale =
      1.0 / static_cast<double>(o.model.numMicroBatches * o.dataParallel);
  for (int64_t m = 0; m < o.model.numMicroBatches; ++m) {
    const std::string sfx = "." + std::to_string(m);
    const uint32_t x = st.act("x" + sfx, {B, S, D});
    const uint32_t h = st.act("h" + sfx, {B, S, D});
    const uint32_t rstd = st.act("rstd" + sfx, {B, S});
    const uint32_t logits = st.act("logits" + sfx, {B, S, kVocab});
    const uint32_t lse = st.act("lse" + sfx, {B, S});
    const uint32_t dlogits = st.act("dlogits" + sfx, {B, S, kVocab});
    const uint32_t dh = st.act("dh" + sfx, {B, S, D});
    const uint32_t dx = st.act("dx" + sfx, {B, S, D});
    b.computeMicroBatch(static_cast<uint32_t>(m));
    b.stage(0, labels, static_cast<uint32_t>(m));
    // The receives' stream hands the embeddings to the compute on event 0;
    // the compute hands their gradient to the sends' on event 1.
    b.recv(st.recvs, x, -1, 0);
    st.handOff(st.recvs, 0, 0, st.received);
    b.launch(st.step, 0, "rms_norm", {x, norm}, {h, rstd},
             {floatAttr("eps", 1e-5)});
    b.launch(st.step, 0, "linear", {h, head}, {logits});
    b.launch(st.step, 0, "cross_entropy", {logits, labels}, {loss, lse});
    b.launch(st.step, 0, "cross_entropy_grad_input", {logits, labels, lse},
             {dlogits}, {floatAttr("scale", scale)});
    b.launch(st.step, 0, "linear_grad_weight", {dlogits, h}, {b.grad(head)},
             {intAttr("accumulate", 1)});
    b.launch(st.step, 0, "linear_grad_input", {dlogits, head}, {dh});
    b.launch(st.step, 0, "rms_norm_grad_weight", {dh, x, rstd}, {b.grad(norm)},
             {intAttr("accumulate", 1)});
    b.launch(st.step, 0, "rms_norm_grad_input", {dh, x, norm, rstd}, {dx});
    st.handOff(0, st.sends, 1, st.sent);
    b.send(st.sends, dx, -1, 1);
    b.endMicroBatch();
    b.launch(st.step, 0, "accumulate", {loss}, {b.plan().loss_sum_tensor()});
  }
  st.optimizer({norm, head});
  b.finishStep();
  return b.build();
}

} // namespace

plan::Plan tinyPipelinePlan(const TinyPipelineOptions &options) {
  return pipelinePlan({embeddingStage(options), lossStage(options)});
}

} // namespace braid::test
