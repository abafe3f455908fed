#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {
namespace {

using spec::Architecture;

struct Requirement {
  const char *field;
  int actual;
  int wanted;
  const char *why;
};

std::string enumName(const google::protobuf::EnumDescriptor *type, int value) {
  const google::protobuf::EnumValueDescriptor *v =
      type->FindValueByNumber(value);
  return v ? v->name() : absl::StrCat(value);
}

class ArchitectureRules {
public:
  ArchitectureRules(const Architecture &model, RuleSink &sink)
      : m_(model), sink_(sink) {}

  void run() {
    bool vocab = checkRequiredCount(
        m_.vocab_size(), "model.vocab_size",
        "the vocabulary size, e.g. vocab_size: 32000", sink_);
    hidden_ =
        checkRequiredCount(m_.hidden_size(), "model.hidden_size",
                           "the model width, e.g. hidden_size: 4096", sink_);
    checkRequiredCount(m_.num_layers(), "model.num_layers",
                       "the number of transformer layers, e.g. "
                       "num_layers: 32",
                       sink_);
    heads_ = checkRequiredCount(m_.num_heads(), "model.num_heads",
                                "the number of attention heads, e.g. "
                                "num_heads: 32",
                                sink_);
    checkRequiredCount(m_.ffn_hidden_size(), "model.ffn_hidden_size",
                       "the inner width of the MLP, e.g. "
                       "ffn_hidden_size: 11008",
                       sink_);
    if (vocab)
      checkTokenIds();
    checkEnumSet(m_.norm(), spec::Norm_descriptor(), "model.norm", sink_);
    checkEnumSet(m_.activation(), spec::Activation_descriptor(),
                 "model.activation", sink_);
    position_ = checkEnumSet(m_.position_embedding(),
                             spec::PositionEmbedding_descriptor(),
                             "model.position_embedding", sink_);
    naming_ = checkEnumSet(m_.naming(), spec::CheckpointNaming_descriptor(),
                           "model.naming", sink_);
    checkHeads();
    checkPositions();
    if (checkEnumSet(m_.attention_mask(), spec::AttentionMask_descriptor(),
                     "model.attention_mask", sink_))
      checkMask(vocab);
    checkFloat(m_.norm_eps(), FloatRange::kPositive, "model.norm_eps",
               "set a small epsilon such as 1e-5, or remove the line for "
               "the default 1e-5",
               sink_);
    checkFloat(m_.init().std(), FloatRange::kPositive, "model.init.std",
               "set a standard deviation such as 0.02, or remove the line "
               "for the default 0.02",
               sink_);
    if (naming_)
      checkNaming();
  }

private:
  // Plans and token files store token ids as 32-bit signed integers.
  void checkTokenIds() {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (m_.vocab_size() > kMax)
      sink_.report(
          "model.vocab_size",
          absl::StrCat(m_.vocab_size(), " exceeds ", kMax,
                       "; token ids are 32-bit signed integers in plans "
                       "and token files, so use a smaller vocabulary"));
  }

  void checkHeads() {
    int64_t heads = m_.num_heads();
    int64_t kv = m_.num_kv_heads();
    bool headDimValid = hidden_ && heads_;
    if (headDimValid && m_.hidden_size() % heads != 0) {
      int64_t hidden = m_.hidden_size();
      std::string choices = formatChoices(nearbyChoices(
          heads, hidden, [&](int64_t h) { return hidden % h == 0; }));
      sink_.report("model.num_heads",
                   absl::StrCat(heads, " does not divide hidden_size ", hidden,
                                "; choose a divisor of ", hidden, " such as ",
                                choices));
      headDimValid = false;
    }
    if (kv < 0) {
      sink_.report("model.num_kv_heads",
                   absl::StrCat(kv, " is not positive; set the number of "
                                    "key/value heads (a divisor of num_heads), "
                                    "or remove the line to use num_heads"));
    } else if (kv > 0 && heads_ && heads % kv != 0) {
      std::string choices = formatChoices(
          nearbyChoices(kv, heads, [&](int64_t k) { return heads % k == 0; }));
      std::string problem =
          kv > heads ? absl::StrCat(kv, " is more than num_heads ", heads)
                     : absl::StrCat(kv, " does not divide num_heads ", heads);
      sink_.report("model.num_kv_heads",
                   absl::StrCat(problem,
                                "; each key/value head serves a whole group of "
                                "query heads, so choose a divisor of ",
                                heads, " such as ", choices));
    }
    if (headDimValid && position_ && m_.position_embedding() == spec::ROPE) {
      int64_t hidden = m_.hidden_size();
      int64_t headDim = hidden / heads;
      if (headDim % 2 != 0) {
        std::string choices =
            formatChoices(nearbyChoices(heads, hidden, [&](int64_t h) {
              return hidden % h == 0 && (hidden / h) % 2 == 0;
            }));
        sink_.report(
            "model.num_heads",
            absl::StrCat("the head dimension hidden_size / num_heads = ",
                         hidden, " / ", heads, " = ", headDim,
                         " is odd, but ROPE rotates pairs of dimensions; "
                         "choose num_heads such as ",
                         choices, " for an even head dimension"));
      }
    }
  }

  // Fields that belong to one kind of position embedding only.
  void checkPositions() {
    if (!position_)
      return;
    if (m_.position_embedding() == spec::LEARNED) {
      int64_t rows = m_.max_position_embeddings();
      if (rows == 0)
        sink_.report(
            "model.max_position_embeddings",
            "missing; LEARNED positions need the number of rows of the "
            "position table, at least train.seq_len, e.g. "
            "max_position_embeddings: 2048");
      else if (rows < 0)
        sink_.report("model.max_position_embeddings",
                     absl::StrCat(rows,
                                  " is not positive; set the number of rows "
                                  "of the position table, at least "
                                  "train.seq_len"));
      if (m_.rope_theta() != 0)
        sink_.report("model.rope_theta",
                     "applies to ROPE only, but position_embedding is LEARNED; "
                     "remove the line");
      return;
    }
    if (m_.max_position_embeddings() != 0)
      sink_.report(
          "model.max_position_embeddings",
          "applies to LEARNED only, but position_embedding is ROPE, "
          "which has no position table; remove the line (train.seq_len "
          "sets the sequence length)");
    checkFloat(m_.rope_theta(), FloatRange::kPositive, "model.rope_theta",
               "set the RoPE base frequency such as 10000 or 500000, or "
               "remove the line for the default 10000",
               sink_);
  }

  // The fields that belong to one attention mask only. The prefix's upper
  // bound, train.seq_len, is checked with the training settings.
  void checkMask(bool vocab) {
    const bool prefixLm = m_.attention_mask() == spec::PREFIX_LM;
    const bool document = m_.attention_mask() == spec::DOCUMENT;
    if (prefixLm && !sink_.written("model.prefix_length"))
      sink_.report("model.prefix_length",
                   "missing; PREFIX_LM needs the number of positions that "
                   "see each other, e.g. prefix_length: 64");
    else if (prefixLm && m_.prefix_length() <= 0)
      sink_.report("model.prefix_length",
                   absl::StrCat(m_.prefix_length(),
                                " is not positive; set the number of prefix "
                                "positions, 1 to train.seq_len"));
    else if (!prefixLm && sink_.written("model.prefix_length"))
      sink_.report("model.prefix_length",
                   "applies to attention_mask PREFIX_LM only; remove the "
                   "line or set attention_mask: PREFIX_LM");
    if (document && !sink_.written("model.document_separator"))
      sink_.report("model.document_separator",
                   "missing; DOCUMENT needs the token id that ends each "
                   "document, e.g. document_separator: 0");
    else if (document && vocab &&
             (m_.document_separator() < 0 ||
              m_.document_separator() >= m_.vocab_size()))
      sink_.report("model.document_separator",
                   absl::StrCat(m_.document_separator(),
                                " is not a token id; choose one in 0 .. ",
                                m_.vocab_size() - 1, " (vocab_size - 1)"));
    else if (!document && sink_.written("model.document_separator"))
      sink_.report("model.document_separator",
                   "applies to attention_mask DOCUMENT only; remove the "
                   "line or set attention_mask: DOCUMENT");
  }

  // A checkpoint naming fixes which tensors exist, so the architecture must
  // be one that the naming's Hugging Face model class can load.
  void checkNaming() {
    std::vector<Requirement> needs;
    const char *fix;
    if (m_.naming() != spec::HF_GPT2) {
      fix = spec::CheckpointNaming_Name(m_.naming()).c_str();
      needs = {
          {"norm", m_.norm(), spec::RMS_NORM,
           "Llama checkpoints hold RMSNorm weights without biases"},
          {"activation", m_.activation(), spec::SWIGLU,
           "Llama's MLP is gate_proj, up_proj and down_proj (SwiGLU)"},
          {"position_embedding", m_.position_embedding(), spec::ROPE,
           "Llama has no position table and applies rotary embeddings"},
      };
    } else {
      fix = "HF_GPT2";
      needs = {
          {"norm", m_.norm(), spec::LAYER_NORM,
           "GPT-2 checkpoints hold LayerNorm weights and biases"},
          {"activation", m_.activation(), spec::GELU,
           "GPT-2's MLP is c_fc, GELU and c_proj"},
          {"position_embedding", m_.position_embedding(), spec::LEARNED,
           "GPT-2 checkpoints hold a learned position table (wpe)"},
      };
    }
    const google::protobuf::Descriptor *desc = Architecture::descriptor();
    for (const Requirement &need : needs) {
      const google::protobuf::EnumDescriptor *type =
          desc->FindFieldByName(need.field)->enum_type();
      // An unset or unknown value was reported already.
      if (!type->FindValueByNumber(need.actual) || need.actual == 0 ||
          need.actual == need.wanted)
        continue;
      sink_.report(
          absl::StrCat("model.", need.field),
          absl::StrCat("naming ", fix, " needs ", enumName(type, need.wanted),
                       ", got ", enumName(type, need.actual), ": ", need.why,
                       "; set ", need.field, ": ", enumName(type, need.wanted),
                       " or choose another naming"));
    }
    if (m_.naming() != spec::HF_GPT2)
      return;
    if (!m_.linear_bias())
      sink_.report(
          "model.linear_bias",
          "naming HF_GPT2 needs linear_bias: true: GPT-2 checkpoints "
          "hold a bias for every linear layer; set linear_bias: true or "
          "choose another naming");
    if (heads_ && m_.num_kv_heads() > 0 && m_.num_kv_heads() != m_.num_heads())
      sink_.report(
          "model.num_kv_heads",
          absl::StrCat("naming HF_GPT2 needs num_kv_heads equal to "
                       "num_heads ",
                       m_.num_heads(), ", got ", m_.num_kv_heads(),
                       ": GPT-2's fused c_attn weight has no grouped-query "
                       "layout; remove the line or choose naming: "
                       "HF_LLAMA"));
  }

  const Architecture &m_;
  RuleSink &sink_;
  bool hidden_ = false;
  bool heads_ = false;
  bool position_ = false;
  bool naming_ = false;
};

} // namespace

void validateArchitecture(const Architecture &model, RuleSink &sink) {
  ArchitectureRules(model, sink).run();
}

} // namespace braid
