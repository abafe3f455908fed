#include "absl/strings/str_cat.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {
namespace {

void checkBatch(const spec::Training &t, RuleSink &sink) {
  bool micro = checkRequiredCount(
      t.micro_batch_size(), "train.micro_batch_size",
      "the sequences per micro-batch, e.g. micro_batch_size: 8", sink);
  int64_t global = t.global_batch_size();
  if (global < 0) {
    sink.report("train.global_batch_size",
                absl::StrCat(global, " is not positive; set the sequences per "
                                     "optimizer step (a multiple of "
                                     "micro_batch_size), or remove the line to "
                                     "use micro_batch_size"));
    return;
  }
  int64_t mb = t.micro_batch_size();
  if (!micro || global % mb == 0)
    return;
  int64_t below = global / mb * mb;
  std::string choices =
      below > 0 ? absl::StrCat(below, " or ", below + mb) : absl::StrCat(mb);
  sink.report("train.global_batch_size",
              absl::StrCat(global, " is not a multiple of micro_batch_size ",
                           mb,
                           "; each step accumulates global_batch_size / "
                           "micro_batch_size whole micro-batches, so use ",
                           choices));
}

void checkOptimizer(const spec::Training &t, bool &lrValid, RuleSink &sink) {
  if (!t.has_adamw()) {
    sink.report("train.adamw", "missing; set at least the peak learning rate, "
                               "e.g. adamw { lr: 3e-4 }");
    return;
  }
  const spec::AdamW &a = t.adamw();
  if (a.lr() == 0 && !sink.written("train.adamw.lr"))
    sink.report("train.adamw.lr",
                "missing; set the peak learning rate, e.g. lr: 3e-4");
  else
    lrValid = checkFloat(a.lr(), FloatRange::kPositive, "train.adamw.lr",
                         "set the peak learning rate, e.g. lr: 3e-4", sink);
  checkFloat(a.beta1(), FloatRange::kFraction, "train.adamw.beta1",
             "beta1 is a decay rate, typically 0.9; remove the line for the "
             "default 0.9",
             sink);
  checkFloat(a.beta2(), FloatRange::kFraction, "train.adamw.beta2",
             "beta2 is a decay rate, typically 0.95 or 0.999; remove the "
             "line for the default 0.95",
             sink);
  checkFloat(a.eps(), FloatRange::kPositive, "train.adamw.eps",
             "set a small epsilon such as 1e-8, or remove the line for the "
             "default 1e-8",
             sink);
  checkFloat(a.weight_decay(), FloatRange::kNonNegative,
             "train.adamw.weight_decay",
             "set 0 for no decay or a positive value such as 0.1", sink);
}

void checkSchedule(const spec::Training &t, bool lrValid, RuleSink &sink) {
  const spec::LRSchedule &s = t.lr_schedule();
  int64_t warmup = s.warmup_steps();
  if (warmup < 0)
    sink.report("train.lr_schedule.warmup_steps",
                absl::StrCat(warmup,
                             " is negative; set 0 for no warm-up or the "
                             "number of warm-up steps"));
  else if (t.steps() > 0 && warmup > t.steps())
    sink.report("train.lr_schedule.warmup_steps",
                absl::StrCat(warmup, " exceeds steps ", t.steps(),
                             "; warm-up must end by the last step, so use at "
                             "most ",
                             t.steps()));
  bool decay = checkEnumSet(s.decay(), spec::LRDecay_descriptor(),
                            "train.lr_schedule.decay", sink);
  if (!checkFloat(s.min_lr(), FloatRange::kNonNegative,
                  "train.lr_schedule.min_lr",
                  "set the final learning rate of the cosine decay, 0 or "
                  "a positive value below adamw.lr",
                  sink) ||
      !decay)
    return;
  if (s.decay() == spec::CONSTANT && s.min_lr() != 0)
    sink.report(
        "train.lr_schedule.min_lr",
        "applies to COSINE decay only, but decay is CONSTANT; remove the "
        "line or set decay: COSINE");
  else if (s.decay() == spec::COSINE && lrValid && s.min_lr() > t.adamw().lr())
    sink.report(
        "train.lr_schedule.min_lr",
        absl::StrCat(formatFloat(s.min_lr()), " exceeds adamw.lr ",
                     formatFloat(t.adamw().lr()),
                     "; cosine decay goes down from lr to min_lr, so use "
                     "at most ",
                     formatFloat(t.adamw().lr())));
}

} // namespace

void validateTraining(const spec::Training &t, RuleSink &sink) {
  checkBatch(t, sink);
  checkRequiredCount(t.seq_len(), "train.seq_len",
                     "the tokens per sequence, e.g. seq_len: 2048", sink);
  checkRequiredCount(t.steps(), "train.steps",
                     "the optimizer steps of the run, e.g. steps: 1000", sink);
  bool lrValid = false;
  checkOptimizer(t, lrValid, sink);
  checkFloat(t.grad_clip(), FloatRange::kNonNegative, "train.grad_clip",
             "set 0 for no clipping or a maximum gradient norm such as 1.0",
             sink);
  checkSchedule(t, lrValid, sink);
  checkFloat(t.hidden_dropout(), FloatRange::kFraction, "train.hidden_dropout",
             "it is the probability of zeroing an activation; set 0 for no "
             "dropout or a value such as 0.1",
             sink);
  checkFloat(t.attention_dropout(), FloatRange::kFraction,
             "train.attention_dropout",
             "it is the probability of zeroing an attention weight; set 0 for "
             "no dropout or a value such as 0.1",
             sink);
  checkEnumSet(t.precision(), spec::Precision_descriptor(), "train.precision",
               sink);
}

} // namespace braid
