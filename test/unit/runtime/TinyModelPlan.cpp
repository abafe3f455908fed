#include "test/unit/runtime/TinyModelPlan.h"

#include "test/unit/runtime/PlanBuilder.h"

namespace braid::test {

plan::Plan tinyModelPlan(const TinyModelOptions &o) {
  PlanBuilder b;
  b.plan().set_name("tiny-model");
  plan::TrainConfig &t = b.train();
  t.set_micro_batch_size(o.microBatchSize);
  t.set_num_micro_batches(o.numMicroBatches);
  t.set_seq_len(o.seqLen);
  t.set_steps(o.steps);
  t.set_warmup_steps(2);
  const int64_t B = o.microBatchSize, S = o.seqLen, D = o.hidden, V = 256;
  b.plan().mutable_model()->set_hidden_size(D);
  b.plan().mutable_model()->set_num_layers(0);
  b.plan().mutable_model()->set_num_parameters(2 * V * D + D);
  b.plan().mutable_model()->set_flops_per_token(6.0 * (V * D + D));
  b.plan().mutable_model()->set_num_heads(1);
  b.plan().mutable_model()->set_num_kv_heads(1);
  b.plan().mutable_model()->set_head_dim(D);
  b.plan().mutable_model()->set_max_position_embeddings(S);

  const bool offload = o.optimizerOffload;
  uint32_t embed = b.parameter("model.embed_tokens.weight", {V, D},
                               plan::NORMAL, 0.5f, offload);
  uint32_t norm = b.parameter("model.norm.weight", {D}, plan::ONES, 0.02f,
                              offload);
  uint32_t head = b.parameter("lm_head.weight", {V, D}, plan::NORMAL, 0.1f,
                              offload);
  // What compute reads: the masters, or with offload their f32 device
  // copies, which "init" fills from the host masters.
  uint32_t embedW = embed, normW = norm, headW = head;
  if (offload) {
    for (uint32_t *w : {&embedW, &normW, &headW}) {
      const plan::Tensor &pt = b.plan().tensors(*w);
      std::vector<int64_t> shape(pt.shape().begin(), pt.shape().end());
      const uint32_t copy = b.tensor(pt.name() + ".copy", shape, plan::F32,
                                     plan::WEIGHT_COPY);
      b.plan().mutable_tensors(*w)->mutable_param()->set_compute_copy(copy);
      b.launch("init", 0, "copy", {*w}, {copy});
      *w = copy;
    }
    b.plan().add_host_streams(kTinyHostStream);
  }
  if (o.transposedHead)
    b.plan().mutable_tensors(head)->mutable_param()->set_checkpoint_transposed(
        true);
  if (!o.embeddingAlias.empty())
    b.plan().mutable_tensors(embed)->mutable_param()->set_tied_alias(
        o.embeddingAlias);
  b.standardInputsAndScalars(o.positions);
  const uint32_t tokens = b.id("tokens"), labels = b.id("labels");
  const uint32_t loss = b.plan().loss_tensor();
  const uint32_t gradNorm = b.plan().grad_norm_tensor();
  const uint32_t lossSum = b.plan().loss_sum_tensor();
  const uint32_t skipped = b.plan().step_skipped_tensor();

  // The step starts from zero gradients and loss sum.
  const std::string step = "step";
  for (uint32_t p : {embed, norm, head})
    b.launch(step, 0, "fill", {}, {b.grad(p)}, {floatAttr("value", 0)});
  b.launch(step, 0, "fill", {}, {lossSum}, {floatAttr("value", 0)});

  const uint32_t wgrad = o.twoStreams ? 1 : 0;
  // Two event timelines: event 0 hands work from stream 0 to the weight
  // gradients' stream 1, event 1 hands back; each record raises its value.
  uint64_t toWgrad = 0, toMain = 0;
  const int64_t stated = o.repeated ? 1 : o.numMicroBatches;
  if (o.repeated)
    b.beginRepeat(static_cast<uint32_t>(o.numMicroBatches));
  for (int64_t m = 0; m < stated; ++m) {
    // Each micro-batch's transients are its own, as braidc plans them.
    const std::string sfx = "." + std::to_string(m);
    auto act = [&](const std::string &name, std::vector<int64_t> shape) {
      return b.tensor(name + sfx, std::move(shape), plan::F32,
                      plan::ACTIVATION);
    };
    uint32_t x = act("x", {B, S, D});
    uint32_t h = act("h", {B, S, D});
    uint32_t rstd = act("rstd", {B, S});
    uint32_t logits = act("logits", {B, S, V});
    uint32_t lse = act("lse", {B, S});
    uint32_t dlogits = act("dlogits", {B, S, V});
    uint32_t dh = act("dh", {B, S, D});
    // dx reuses the bytes of logits, whose last use comes before dx's
    // first.
    uint32_t dx = b.activationAt("dx" + sfx, {B, S, D}, logits);

    b.beginMicroBatch(static_cast<uint32_t>(m));
    b.launch(step, 0, "embedding", {embedW, tokens}, {x});
    b.launch(step, 0, "rms_norm", {x, normW}, {h, rstd},
             {floatAttr("eps", 1e-5)});
    b.launch(step, 0, "linear", {h, headW}, {logits});
    b.launch(step, 0, "cross_entropy", {logits, labels}, {loss, lse});
    b.launch(step, 0, "cross_entropy_grad_input", {logits, labels, lse},
             {dlogits}, {floatAttr("scale", 1.0 / o.numMicroBatches)});
    if (o.twoStreams) {
      b.record(step, 0, 0, ++toWgrad);
      b.wait(step, 1, 0, toWgrad);
    }
    b.launch(step, wgrad, "linear_grad_weight", {dlogits, h}, {b.grad(head)},
             {intAttr("accumulate", 1)});
    b.launch(step, 0, "linear_grad_input", {dlogits, headW}, {dh});
    if (o.twoStreams) {
      b.record(step, 0, 0, ++toWgrad);
      b.wait(step, 1, 0, toWgrad);
    }
    b.launch(step, wgrad, "rms_norm_grad_weight", {dh, x, rstd},
             {b.grad(norm)}, {intAttr("accumulate", 1)});
    b.launch(step, 0, "rms_norm_grad_input", {dh, x, normW, rstd}, {dx});
    if (o.twoStreams) {
      // Stream 0's next micro-batch writes what stream 1 read.
      b.record(step, 1, 1, ++toMain);
      b.wait(step, 0, 1, toMain);
    }
    b.launch(step, 0, "embedding_grad_weight", {dx, tokens}, {b.grad(embed)},
             {intAttr("accumulate", 1)});
    b.endMicroBatch();
    b.launch(step, 0, "accumulate", {loss}, {lossSum});
  }
  if (o.repeated)
    b.endRepeat();

  b.launch(step, 0, "grad_norm", {b.grad(embed), b.grad(norm), b.grad(head)},
           {gradNorm});
  b.launch(step, 0, "step_guard", {lossSum, gradNorm}, {skipped});
  if (offload) {
    // Event 2: stream 0 hands the gradients to the copy stream; event 3:
    // the copy stream hands their host copies to the host stream (1), and
    // the updated copies back to stream 0 (2); event 4: the host stream
    // hands the updated masters to the copy stream.
    const uint32_t C = kTinyCopyStream, H = kTinyHostStream;
    std::vector<uint32_t> hostGrads;
    for (uint32_t p : {embed, norm, head}) {
      const plan::Tensor &pt = b.plan().tensors(p);
      hostGrads.push_back(b.hostTensor(
          pt.name() + ".grad.host",
          std::vector<int64_t>(pt.shape().begin(), pt.shape().end())));
    }
    const uint32_t normHost = b.hostTensor("grad_norm.host", {});
    const uint32_t skippedHost = b.hostTensor("step_skipped.host", {});
    b.record(step, 0, 2, 1);
    b.wait(step, C, 2, 1);
    const uint32_t params[] = {embed, norm, head};
    for (int k = 0; k < 3; ++k)
      b.launch(step, C, "copy", {b.grad(params[k])}, {hostGrads[k]});
    b.launch(step, C, "copy", {gradNorm}, {normHost});
    b.launch(step, C, "copy", {skipped}, {skippedHost});
    b.record(step, C, 3, 1);
    b.wait(step, H, 3, 1);
    for (int k = 0; k < 3; ++k) {
      const plan::Tensor &pt = b.plan().tensors(params[k]);
      b.launch(step, H, "adamw", {hostGrads[k], normHost, skippedHost},
               {params[k], pt.param().exp_avg(), pt.param().exp_avg_sq()},
               {floatAttr("beta1", t.beta1()), floatAttr("beta2", t.beta2()),
                floatAttr("eps", t.eps()),
                floatAttr("weight_decay",
                          pt.shape_size() == 2 ? t.weight_decay() : 0.0),
                floatAttr("grad_clip", t.grad_clip())});
    }
    b.record(step, H, 4, 1);
    b.wait(step, C, 4, 1);
    for (uint32_t p : params)
      b.launch(step, C, "copy", {p},
               {b.plan().tensors(p).param().compute_copy()});
    b.record(step, C, 3, 2);
    b.wait(step, 0, 3, 2);
  } else {
    for (uint32_t p : {embed, norm, head})
      b.adamw(p, gradNorm, skipped);
  }
  if (o.weightCopies) {
    t.set_precision(plan::TrainConfig::BF16);
    for (uint32_t p : {embed, head}) {
      const plan::Tensor &pt = b.plan().tensors(p);
      std::vector<int64_t> shape(pt.shape().begin(), pt.shape().end());
      uint32_t copy = b.tensor(pt.name() + ".bf16", shape, plan::BF16,
                               plan::WEIGHT_COPY);
      b.plan().mutable_tensors(p)->mutable_param()->set_compute_copy(copy);
      b.launch("init", 0, "cast", {p}, {copy});
      b.launch(step, 0, "cast", {p}, {copy});
    }
  }
  b.finishStep();
  return b.build();
}

} // namespace braid::test
