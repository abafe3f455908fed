#include "compiler/spec/SpecValidator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/spec/SpecErrors.h"
#include "compiler/spec/SpecPipeline.h"

namespace braid {
namespace {

bool isAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

// The name becomes part of file names (plans, checkpoints, logs), so it is
// held to the characters that are safe in any file system and shell.
void checkName(const std::string &name, RuleSink &sink) {
  constexpr size_t kMaxLength = 64;
  if (name.size() > kMaxLength) {
    sink.report("name",
                absl::StrCat("is ", name.size(),
                             " characters long; use at most ", kMaxLength));
    return;
  }
  if (!name.empty() && !isAlnum(name[0])) {
    sink.report("name", absl::StrCat("\"", printableToken(name),
                                     "\" must start with a letter or digit"));
    return;
  }
  for (char c : name) {
    if (isAlnum(c) || c == '.' || c == '_' || c == '-')
      continue;
    sink.report("name",
                absl::StrCat("\"", printableToken(name), "\" contains '",
                             printableToken(std::string_view(&c, 1)),
                             "'; use only letters, digits, '.', '_' and "
                             "'-', since the name becomes part of file "
                             "names"));
    return;
  }
}

void checkParallel(const spec::ParallelLayout &p, RuleSink &sink) {
  constexpr int64_t kMaxRanks = int64_t{1} << 24;
  if (p.tensor_parallel() < 1 || p.tensor_parallel() > 1024)
    sink.report("parallel.tensor_parallel",
                absl::StrCat(p.tensor_parallel(),
                             " is not a number of ranks; set 1 to 1024 "
                             "tensor-parallel ranks"));
  if (p.data_parallel() < 1 || p.data_parallel() > kMaxRanks)
    sink.report("parallel.data_parallel",
                absl::StrCat(p.data_parallel(),
                             " is not a number of ranks; set 1 to 2^24 "
                             "data-parallel ranks"));
  if (p.pipeline_parallel() < 1 || p.pipeline_parallel() > kMaxRanks)
    sink.report("parallel.pipeline_parallel",
                absl::StrCat(p.pipeline_parallel(),
                             " is not a number of pipeline stages; set 1 to "
                             "2^24"));
  if (p.virtual_stages() < 1 || p.virtual_stages() > 1024)
    sink.report("parallel.virtual_stages",
                absl::StrCat(p.virtual_stages(),
                             " is not a number of model chunks per rank; set "
                             "1 to 1024"));
  if (p.zero_stage() < 0 || p.zero_stage() > 3)
    sink.report("parallel.zero_stage",
                absl::StrCat(p.zero_stage(),
                             " is not a ZeRO stage; set 0 (nothing sharded), "
                             "1 (optimizer state), 2 (and gradients) or 3 "
                             "(and parameters)"));
  if (!(p.bucket_mb() >= 0 && p.bucket_mb() <= double(int64_t{1} << 20)))
    sink.report("parallel.bucket_mb",
                absl::StrCat(p.bucket_mb(),
                             " is not a bucket size; set 0 (one collective "
                             "per gradient) to 1048576 MiB"));
  if (p.comm_chunks() < 1 || p.comm_chunks() > 1024)
    sink.report("parallel.comm_chunks",
                absl::StrCat(p.comm_chunks(),
                             " is not a number of pieces; set 1 (whole "
                             "collectives) to 1024"));
  if (p.context_parallel() < 1 || p.context_parallel() > 1024)
    sink.report("parallel.context_parallel",
                absl::StrCat(p.context_parallel(),
                             " is not a number of ranks; set 1 to 1024 "
                             "context-parallel ranks"));
  if (p.cp_comm_type() != spec::P2P && p.cp_comm_type() != spec::ALL_GATHER)
    sink.report("parallel.cp_comm_type",
                absl::StrCat(static_cast<int>(p.cp_comm_type()),
                             " is not a way of reaching the keys; set P2P "
                             "(ring attention) or ALL_GATHER"));
  int64_t ranks = 1;
  for (int64_t n : {p.tensor_parallel(), p.context_parallel(),
                    p.pipeline_parallel(), p.data_parallel()})
    ranks = n >= 1 && n <= kMaxRanks && ranks <= kMaxRanks ? ranks * n : ranks;
  if (ranks > kMaxRanks)
    sink.report("parallel",
                absl::StrCat("tensor_parallel x context_parallel x "
                             "pipeline_parallel x data_parallel is ",
                             ranks, " ranks; a run has at most 2^24"));
}

// Context parallel splits every sequence into 2 * CP equal chunks; the
// layouts it does not combine with yet are refused with what to change.
void checkContextParallel(const spec::ModelSpec &spec, RuleSink &sink) {
  const spec::ParallelLayout &p = spec.parallel();
  const int64_t cp = p.context_parallel();
  if (cp <= 1)
    return;
  const int64_t seq = spec.train().seq_len();
  const int64_t unit =
      2 * cp * (p.sequence_parallel() ? p.tensor_parallel() : 1);
  if (seq > 0 && seq % unit != 0)
    sink.report("train.seq_len",
                absl::StrCat(seq, " positions do not split into ", unit,
                             " equal chunks (2 x context_parallel",
                             p.sequence_parallel()
                                 ? " x tensor_parallel, for sequence parallel"
                                 : "",
                             "); choose a seq_len that is a multiple of ",
                             unit));
  auto notYet = [&](const char *field, const std::string &what) {
    sink.report(field, absl::StrCat(what, " does not combine with "
                                          "context_parallel yet; ",
                                    "remove it or set context_parallel: 1"));
  };
  if (p.pipeline_parallel() > 1)
    notYet("parallel.pipeline_parallel",
           absl::StrCat("pipeline_parallel ", p.pipeline_parallel()));
  if (p.zero_stage() > 0)
    notYet("parallel.zero_stage",
           absl::StrCat("zero_stage ", p.zero_stage(),
                        " (ZeRO shards over the data-parallel ranks only, "
                        "while context parallel's gradients are summed over "
                        "DP x CP)"));
  if (p.sequence_parallel())
    notYet("parallel.sequence_parallel", "sequence_parallel");
  if (p.tp_comm_overlap())
    notYet("parallel.tp_comm_overlap", "tp_comm_overlap");
}

// Tensor parallel splits heads, kv heads (or replicates them, when there are
// fewer than ranks), the FFN and the vocabulary into equal parts.
void checkTensorParallel(const spec::ModelSpec &spec, RuleSink &sink) {
  const spec::ParallelLayout &p = spec.parallel();
  const spec::Architecture &m = spec.model();
  const int64_t tp = p.tensor_parallel();
  if (p.sequence_parallel() && tp <= 1)
    sink.report("parallel.sequence_parallel",
                "applies to tensor_parallel above 1: it splits the sequence "
                "over the TP ranks; set tensor_parallel or remove the line");
  if (p.tp_comm_overlap() && tp <= 1)
    sink.report("parallel.tp_comm_overlap",
                "applies to tensor_parallel above 1; set tensor_parallel or "
                "remove the line");
  if (p.tp_comm_chunks() < 0 || p.tp_comm_chunks() == 1 ||
      p.tp_comm_chunks() > 64)
    sink.report("parallel.tp_comm_chunks",
                absl::StrCat(p.tp_comm_chunks(),
                             " is not a number of pieces; set 2 to 64 (0: "
                             "4, or 2 with sequence_parallel)"));
  if (p.tp_comm_pair_micro_batches()) {
    const int64_t mb = spec.train().micro_batch_size();
    const int64_t dp = std::max<int64_t>(p.data_parallel(), 1);
    const int64_t global = spec.train().global_batch_size();
    if (!p.tp_comm_overlap())
      sink.report("parallel.tp_comm_pair_micro_batches",
                  "pairs the micro-batches of tp_comm_overlap; set "
                  "tp_comm_overlap: true or remove the line");
    else if (p.pipeline_parallel() > 1)
      sink.report("parallel.tp_comm_pair_micro_batches",
                  "does not combine with pipeline_parallel: the pipeline "
                  "schedule orders the micro-batches (DualPipeV pairs "
                  "forward and backward itself); remove the line");
    else if (p.zero_stage() >= 2)
      sink.report("parallel.tp_comm_pair_micro_batches",
                  absl::StrCat("does not combine with zero_stage ",
                               p.zero_stage(),
                               " yet: its reduce-scatters and gathers run "
                               "inside the micro-batches on a stream of "
                               "their own; use zero_stage 0 or 1 or remove "
                               "the line"));
    else if (mb > 0 && global > 0 && global / (mb * dp) < 2)
      sink.report("parallel.tp_comm_pair_micro_batches",
                  absl::StrCat("needs two micro-batches per step or more, "
                               "and global_batch_size ",
                               global, " is one micro-batch of ", mb,
                               " per data-parallel rank; set "
                               "global_batch_size to ",
                               2 * mb * dp, " or more"));
  }
  if (tp <= 1)
    return;
  const int64_t seq = spec.train().seq_len();
  if (p.sequence_parallel() && seq > 0 && seq % tp != 0)
    sink.report("train.seq_len",
                absl::StrCat(seq, " positions do not split into ", tp,
                             " equal sequence-parallel parts; choose a "
                             "seq_len that is a multiple of ",
                             tp));
  auto divisible = [&](const char *field, int64_t n, const char *what) {
    if (n > 0 && n % tp != 0)
      sink.report(field, absl::StrCat(n, " ", what, " do not split into ", tp,
                                      " equal tensor-parallel parts; choose "
                                      "a tensor_parallel that divides ",
                                      n));
  };
  divisible("model.num_heads", m.num_heads(), "attention heads");
  divisible("model.vocab_size", m.vocab_size(),
            "vocabulary entries (the embedding and the LM head are split "
            "along the vocabulary)");
  divisible("model.ffn_hidden_size", m.ffn_hidden_size(), "FFN features");
  const int64_t kv = m.num_kv_heads();
  if (kv > 0 && kv % tp != 0 && tp % kv != 0)
    sink.report("model.num_kv_heads",
                absl::StrCat(kv, " kv heads neither split into ", tp,
                             " tensor-parallel parts nor replicate evenly "
                             "over them; choose a tensor_parallel that "
                             "divides ",
                             kv, " or is a multiple of it"));
}

// Every data-parallel rank accumulates the same number of whole
// micro-batches per step.
void checkDataParallelBatch(const spec::ModelSpec &spec, RuleSink &sink) {
  const int64_t dp = spec.parallel().data_parallel();
  const int64_t mb = spec.train().micro_batch_size();
  const int64_t global = spec.train().global_batch_size();
  if (dp <= 1 || mb <= 0 || global <= 0 || global % mb != 0 ||
      global % (mb * dp) == 0)
    return;
  const int64_t unit = mb * dp;
  const int64_t below = global / unit * unit;
  sink.report("train.global_batch_size",
              absl::StrCat(global, " is not a multiple of micro_batch_size ",
                           mb, " x data_parallel ", dp,
                           "; each data-parallel rank accumulates the same "
                           "number of whole micro-batches, so use ",
                           below > 0 ? absl::StrCat(below, " or ", below + unit)
                                     : absl::StrCat(unit)));
}

// The schedule family's needs (micro-batches, chunks) and the partition's
// (stages against layers, the layout string), from the same code the
// compiler runs (passes/pipeline).
void checkPipeline(const spec::ModelSpec &spec, RuleSink &sink) {
  const spec::ParallelLayout &p = spec.parallel();
  if (p.pipeline_parallel() > 1 && p.zero_stage() >= 2)
    sink.report("parallel.zero_stage",
                absl::StrCat(p.zero_stage(),
                             " does not combine with pipeline_parallel yet: "
                             "ZeRO stages 2 and 3 reduce inside the "
                             "micro-batches; use zero_stage 0 or 1"));
  if (p.pipeline_parallel() > 1 && spec.model().tie_embeddings())
    sink.report("model.tie_embeddings",
                "does not combine with pipeline_parallel yet: the embedding "
                "and the LM head would share one parameter across pipeline "
                "ranks; set tie_embeddings: false or pipeline_parallel: 1");
  absl::StatusOr<pipeline::Schedule> schedule = specSchedule(spec);
  if (!schedule.ok()) {
    sink.report("parallel.pipeline_schedule",
                std::string(schedule.status().message()));
    return;
  }
  absl::StatusOr<pipeline::Partition> partition =
      specPartition(spec, schedule->placement, {});
  if (!partition.ok())
    sink.report(spec.parallel().pipeline_layout().empty()
                    ? "parallel.pipeline_parallel"
                    : "parallel.pipeline_layout",
                std::string(partition.status().message()));
}

// Rules that involve both the model and the training settings.
void checkSequence(const spec::ModelSpec &spec, RuleSink &sink) {
  const spec::Architecture &m = spec.model();
  int64_t seq = spec.train().seq_len();
  if (m.position_embedding() == spec::LEARNED && seq > 0 &&
      m.max_position_embeddings() > 0 && m.max_position_embeddings() < seq)
    sink.report("model.max_position_embeddings",
                absl::StrCat(m.max_position_embeddings(),
                             " is less than train.seq_len ", seq,
                             "; the position table needs a row for every "
                             "position, so set at least ",
                             seq));
  if (m.attention_mask() == spec::PREFIX_LM && seq > 0 &&
      m.prefix_length() > seq)
    sink.report("model.prefix_length",
                absl::StrCat(m.prefix_length(), " is more than train.seq_len ",
                             seq, "; the prefix is part of each sequence, so "
                                  "set at most ",
                             seq));
}

// Passes findings on and counts them.
class CountingSink : public RuleSink {
public:
  explicit CountingSink(RuleSink &inner) : inner_(inner) {}

  void report(const std::string &path, std::string message) override {
    ++count_;
    inner_.report(path, std::move(message));
  }
  bool written(const std::string &path) const override {
    return inner_.written(path);
  }
  size_t count() const { return count_; }

private:
  RuleSink &inner_;
  size_t count_ = 0;
};

} // namespace

void validateSpec(const spec::ModelSpec &spec, RuleSink &sink) {
  CountingSink counting(sink);
  checkName(spec.name(), counting);
  if (spec.has_model())
    validateArchitecture(spec.model(), counting);
  else
    counting.report("model",
                    "missing; add a model { ... } block with the "
                    "architecture (vocab_size, hidden_size, num_layers, "
                    "num_heads, ffn_hidden_size, norm, activation, "
                    "position_embedding, naming)");
  checkParallel(spec.parallel(), counting);
  if (spec.has_train())
    validateTraining(spec.train(), counting);
  else
    counting.report("train",
                    "missing; add a train { ... } block with at least "
                    "micro_batch_size, seq_len, steps and adamw { lr }");
  if (spec.has_model() && spec.has_train())
    checkSequence(spec, counting);
  if (spec.has_model())
    checkTensorParallel(spec, counting);
  if (spec.has_train())
    checkContextParallel(spec, counting);
  if (spec.has_train())
    checkDataParallelBatch(spec, counting);
  if (spec.has_model() && spec.has_train())
    validateMoe(spec, counting);
  // The pipeline's rules need every count they divide to be valid.
  if (counting.count() == 0)
    checkPipeline(spec, counting);
  validateCompile(spec.compile(), counting);
  // Offload targets name layers and stages: they need both counts valid.
  if (counting.count() == 0)
    validateOffloadTargets(spec, counting);
  // Sizes are only meaningful once every one of them is valid.
  if (counting.count() == 0)
    validateSizes(spec, counting);
}

} // namespace braid
