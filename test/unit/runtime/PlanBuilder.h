// Hand-built plans for runtime tests: tensors get 64-byte-aligned offsets in
// order of creation, parameters come with their gradient and moments, and
// build() fills in the arena size and memory report.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/plan/plan.pb.h"

namespace braid::test {

plan::Attr intAttr(const std::string &name, int64_t value);
plan::Attr floatAttr(const std::string &name, double value);

class PlanBuilder {
public:
  // A plan of the current format version with one stream, no events and a train
  // config of B = 2, S = 4, M = 1, 3 steps, AdamW defaults, cosine decay.
  PlanBuilder();

  plan::Plan &plan() { return plan_; }
  plan::TrainConfig &train() { return *plan_.mutable_train(); }

  // A new tensor placed after every tensor placed so far.
  uint32_t tensor(const std::string &name, std::vector<int64_t> shape,
                  plan::DType dtype, plan::TensorKind kind);
  // A new ACTIVATION placed at the offset of `sharesWith`.
  uint32_t activationAt(const std::string &name, std::vector<int64_t> shape,
                        uint32_t sharesWith);
  // A view (plan.proto Tensor.view_of) of ACTIVATION `base`: a tensor of
  // the base's dtype whose bytes start `byteOffset` bytes into the base's.
  uint32_t view(const std::string &name, std::vector<int64_t> shape,
                uint32_t base, uint64_t byteOffset = 0);
  // A host tensor (plan.proto Tensor.host): an f32 ACTIVATION in the host
  // arena at host offset `offset`, or after every host tensor placed so far
  // when it is -1. build() sizes memory.host_bytes to reach them all.
  uint32_t hostTensor(const std::string &name, std::vector<int64_t> shape,
                      int64_t offset = -1);
  // A PARAMETER with its GRADIENT ("<name>.grad") and OPTIMIZER_STATE
  // ("<name>.exp_avg", "<name>.exp_avg_sq") tensors; returns its id. With
  // `host` (optimizer offload) the parameter and its moments are host
  // tensors, placed after every host tensor so far (the gradient stays on
  // the device).
  uint32_t parameter(const std::string &name, std::vector<int64_t> shape,
                     plan::InitKind init, float std = 0.02f,
                     bool host = false);
  // TOKENS, LABELS (and POSITIONS) inputs of shape [B, S], and the loss,
  // loss-sum, grad-norm and step-skipped scalars, using the current train
  // config.
  void standardInputsAndScalars(bool positions = false);

  uint32_t id(const std::string &name) const;
  uint32_t grad(uint32_t param) const;

  // Appends to the program called `program` (created on first use: "step"
  // is the STEP program, "init" the INIT program, any other name a program
  // of no kind). Launches into "step" compute the micro-batch begun last.
  void launch(const std::string &program, uint32_t stream,
              const std::string &kernel, std::vector<uint32_t> ins,
              std::vector<uint32_t> outs, std::vector<plan::Attr> attrs = {});
  // AdamW on parameter `param` in "step", on stream 0, with the plan's
  // settings (weight decay on matrices only), reading the gradient norm and
  // the skipped flag.
  void adamw(uint32_t param, uint32_t gradNorm, uint32_t skipped);
  // Event `event` reaches `value` / waits until it has.
  void record(const std::string &program, uint32_t stream, uint32_t event,
              uint64_t value);
  void wait(const std::string &program, uint32_t stream, uint32_t event,
            uint64_t value);
  void stage(uint32_t stream, uint32_t tensor, uint32_t microBatch);
  void readback(uint32_t stream, uint32_t tensor, uint32_t slot);
  // A collective in "step" over `axis`: an all-reduce (no outputs) or a
  // reduce-scatter, all-gather or shift (by `shiftOffset`) from `tensors`
  // into `outputs`.
  void collective(uint32_t stream, plan::CollectiveKind kind,
                  plan::MeshAxis axis, std::vector<uint32_t> tensors,
                  std::vector<uint32_t> outputs = {},
                  int32_t shiftOffset = 0);
  // A send or receive in "step" of `tensor` with the pipeline rank
  // `peerOffset` away, on `channel`.
  void send(uint32_t stream, uint32_t tensor, int32_t peerOffset,
            uint32_t channel);
  void recv(uint32_t stream, uint32_t tensor, int32_t peerOffset,
            uint32_t channel);

  // A Repeat of `count` iterations in "step" around what is added until
  // endRepeat(); its body is written as micro-batch 0, whose loss slot
  // becomes slots 0..count-1.
  void beginRepeat(uint32_t count);
  void endRepeat();

  // Micro-batch `m` of "step": stages every INPUT tensor for it; the
  // launches that follow compute it.
  void beginMicroBatch(uint32_t m);
  // Reads the loss back into slot m (plan.loss_readbacks[m]).
  void endMicroBatch();
  // The launches that follow compute micro-batch `m` (nothing is staged).
  void computeMicroBatch(uint32_t m) { microBatch_ = m; }
  // After the optimizer: reads back the norm and the skipped flag into the
  // slots after the losses (the first slots, without `losses`: a pipeline
  // rank that computes no loss) and sets plan.num_readbacks.
  void finishStep(bool losses = true);
  // A STEP program that only stages, reads back and runs `kernel` (no
  // operands) once per micro-batch: the smallest valid one.
  void minimalStep(const std::string &kernel = "test.touch");

  // Sets arena_bytes, host_bytes and the memory report; num_events covers
  // every event used. Returns the finished plan.
  plan::Plan build();
  std::string bytes();

private:
  plan::Program *program(const std::string &name);
  void transfer(bool send, uint32_t stream, uint32_t tensor,
                int32_t peerOffset, uint32_t channel);

  plan::Plan plan_;
  uint64_t next_ = 0;
  uint64_t nextHost_ = 0;
  uint32_t microBatch_ = 0;
  int repeatAt_ = -1;
};

// A pipeline plan of the effective plans `stages` (each built whole, with
// the same header): the outer plan takes stages[0]'s header with mesh.pp
// the number of stages, and each stage plan is its plan less the header.
plan::Plan pipelinePlan(std::vector<plan::Plan> stages);

} // namespace braid::test
