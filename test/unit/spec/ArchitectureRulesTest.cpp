// Validation rules of the top level, `model` and `parallel`: each rule's
// full message, line:column and field path.
#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

TEST(ModelRules, MissingCountPointsAtEnclosingMessage) {
  EXPECT_EQ(errorOf(edit(kLlama, "  vocab_size: 256\n", "")),
            "t.pbtxt:2:1: model.vocab_size: missing; set the vocabulary "
            "size, e.g. vocab_size: 32000");
  EXPECT_EQ(errorOf(edit(kLlama, "  ffn_hidden_size: 172\n", "")),
            "t.pbtxt:2:1: model.ffn_hidden_size: missing; set the inner "
            "width of the MLP, e.g. ffn_hidden_size: 11008");
}

TEST(ModelRules, MissingHeadsSkipsRulesThatNeedThem) {
  EXPECT_EQ(errorOf(edit(kLlama, "  num_heads: 4\n", "")),
            "t.pbtxt:2:1: model.num_heads: missing; set the number of "
            "attention heads, e.g. num_heads: 32");
}

TEST(ModelRules, WrittenZeroCountIsNotPositive) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 0")),
            "t.pbtxt:5:3: model.num_layers: 0 is not positive; set the "
            "number of transformer layers, e.g. num_layers: 32");
}

TEST(ModelRules, NegativeCount) {
  EXPECT_EQ(errorOf(edit(kLlama, "hidden_size: 64", "hidden_size: -64")),
            "t.pbtxt:4:3: model.hidden_size: -64 is not positive; set the "
            "model width, e.g. hidden_size: 4096");
}

TEST(ModelRules, VocabularyMustFitTokenIds) {
  EXPECT_EQ(errorOf(edit(kLlama, "vocab_size: 256", "vocab_size: 3000000000")),
            "t.pbtxt:3:3: model.vocab_size: 3000000000 exceeds 2147483647; "
            "token ids are 32-bit signed integers in plans and token files, "
            "so use a smaller vocabulary");
}

TEST(ModelRules, HeadsMustDivideHidden) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_heads: 4", "num_heads: 6")),
            "t.pbtxt:6:3: model.num_heads: 6 does not divide hidden_size 64; "
            "choose a divisor of 64 such as 4 or 8");
}

TEST(ModelRules, KvHeadsMustDivideHeads) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_kv_heads: 2", "num_kv_heads: 3")),
            "t.pbtxt:7:3: model.num_kv_heads: 3 does not divide num_heads 4; "
            "each key/value head serves a whole group of query heads, so "
            "choose a divisor of 4 such as 2 or 4");
}

TEST(ModelRules, KvHeadsAboveHeads) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_kv_heads: 2", "num_kv_heads: 8")),
            "t.pbtxt:7:3: model.num_kv_heads: 8 is more than num_heads 4; "
            "each key/value head serves a whole group of query heads, so "
            "choose a divisor of 4 such as 4");
}

TEST(ModelRules, NegativeKvHeads) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_kv_heads: 2", "num_kv_heads: -2")),
            "t.pbtxt:7:3: model.num_kv_heads: -2 is not positive; set the "
            "number of key/value heads (a divisor of num_heads), or remove "
            "the line to use num_heads");
}

TEST(ModelRules, RopeNeedsEvenHeadDimension) {
  std::string text = edit(kLlama, "hidden_size: 64", "hidden_size: 72");
  text = edit(text, "num_heads: 4", "num_heads: 8");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:6:3: model.num_heads: the head dimension hidden_size / "
            "num_heads = 72 / 8 = 9 is odd, but ROPE rotates pairs of "
            "dimensions; choose num_heads such as 6 or 9 for an even head "
            "dimension");
}

TEST(ModelRules, LearnedAllowsOddHeadDimension) {
  std::string text = edit(kGpt2, "hidden_size: 64", "hidden_size: 36");
  EXPECT_EQ(errorOf(text), "(loaded)");
}

TEST(ModelRules, MissingEnum) {
  EXPECT_EQ(errorOf(edit(kLlama, "  norm: RMS_NORM\n", "")),
            "t.pbtxt:2:1: model.norm: missing; write LAYER_NORM or RMS_NORM");
  EXPECT_EQ(errorOf(edit(kLlama, "  naming: HF_LLAMA\n", "")),
            "t.pbtxt:2:1: model.naming: missing; write HF_LLAMA, HF_GPT2, "
            "HF_MIXTRAL or HF_DEEPSEEK_V3");
}

TEST(ModelRules, UnspecifiedEnumIsRefused) {
  EXPECT_EQ(errorOf(edit(kLlama, "activation: SWIGLU",
                         "activation: ACTIVATION_UNSPECIFIED")),
            "t.pbtxt:10:3: model.activation: ACTIVATION_UNSPECIFIED means not "
            "set; write GELU or SWIGLU");
  EXPECT_EQ(errorOf(edit(kLlama, "norm: RMS_NORM", "norm: 0")),
            "t.pbtxt:9:3: model.norm: NORM_UNSPECIFIED means not set; write "
            "LAYER_NORM or RMS_NORM");
}

TEST(ModelRules, UnknownEnumNumber) {
  EXPECT_EQ(errorOf(edit(kLlama, "position_embedding: ROPE",
                         "position_embedding: 7")),
            "t.pbtxt:11:3: model.position_embedding: 7 is not a valid "
            "PositionEmbedding; write LEARNED or ROPE");
}

TEST(ModelRules, LlamaNamingNeedsRmsNorm) {
  EXPECT_EQ(errorOf(edit(kLlama, "norm: RMS_NORM", "norm: LAYER_NORM")),
            "t.pbtxt:9:3: model.norm: naming HF_LLAMA needs RMS_NORM, got "
            "LAYER_NORM: Llama checkpoints hold RMSNorm weights without "
            "biases; set norm: RMS_NORM or choose another naming");
}

TEST(ModelRules, LlamaNamingNeedsSwiglu) {
  EXPECT_EQ(errorOf(edit(kLlama, "activation: SWIGLU", "activation: GELU")),
            "t.pbtxt:10:3: model.activation: naming HF_LLAMA needs SWIGLU, "
            "got GELU: Llama's MLP is gate_proj, up_proj and down_proj "
            "(SwiGLU); set activation: SWIGLU or choose another naming");
}

TEST(ModelRules, LlamaNamingNeedsRope) {
  EXPECT_EQ(errorOf(edit(kLlama, "position_embedding: ROPE",
                         "position_embedding: LEARNED\n"
                         "  max_position_embeddings: 16")),
            "t.pbtxt:11:3: model.position_embedding: naming HF_LLAMA needs "
            "ROPE, got LEARNED: Llama has no position table and applies "
            "rotary embeddings; set position_embedding: ROPE or choose "
            "another naming");
}

TEST(ModelRules, Gpt2NamingNeedsLayerNorm) {
  EXPECT_EQ(errorOf(edit(kGpt2, "norm: LAYER_NORM", "norm: RMS_NORM")),
            "t.pbtxt:8:3: model.norm: naming HF_GPT2 needs LAYER_NORM, got "
            "RMS_NORM: GPT-2 checkpoints hold LayerNorm weights and biases; "
            "set norm: LAYER_NORM or choose another naming");
}

TEST(ModelRules, Gpt2NamingNeedsGelu) {
  EXPECT_EQ(errorOf(edit(kGpt2, "activation: GELU", "activation: SWIGLU")),
            "t.pbtxt:9:3: model.activation: naming HF_GPT2 needs GELU, got "
            "SWIGLU: GPT-2's MLP is c_fc, GELU and c_proj; set activation: "
            "GELU or choose another naming");
}

TEST(ModelRules, Gpt2NamingNeedsLearnedPositions) {
  std::string text =
      edit(kGpt2, "position_embedding: LEARNED", "position_embedding: ROPE");
  text = edit(text, "  max_position_embeddings: 32\n", "");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:10:3: model.position_embedding: naming HF_GPT2 needs "
            "LEARNED, got ROPE: GPT-2 checkpoints hold a learned position "
            "table (wpe); set position_embedding: LEARNED or choose another "
            "naming");
}

TEST(ModelRules, Gpt2NamingNeedsBiases) {
  EXPECT_EQ(errorOf(edit(kGpt2, "linear_bias: true", "linear_bias: false")),
            "t.pbtxt:13:3: model.linear_bias: naming HF_GPT2 needs "
            "linear_bias: true: GPT-2 checkpoints hold a bias for every "
            "linear layer; set linear_bias: true or choose another naming");
}

TEST(ModelRules, Gpt2NamingNeedsAllHeadsForKeysAndValues) {
  EXPECT_EQ(errorOf(edit(kGpt2, "num_heads: 4",
                         "num_heads: 4\n"
                         "  num_kv_heads: 2")),
            "t.pbtxt:7:3: model.num_kv_heads: naming HF_GPT2 needs "
            "num_kv_heads equal to num_heads 4, got 2: GPT-2's fused c_attn "
            "weight has no grouped-query layout; remove the line or choose "
            "naming: HF_LLAMA");
}

TEST(ModelRules, LearnedNeedsPositionTable) {
  EXPECT_EQ(errorOf(edit(kGpt2, "  max_position_embeddings: 32\n", "")),
            "t.pbtxt:2:1: model.max_position_embeddings: missing; LEARNED "
            "positions need the number of rows of the position table, at "
            "least train.seq_len, e.g. max_position_embeddings: 2048");
  EXPECT_EQ(errorOf(edit(kGpt2, "max_position_embeddings: 32",
                         "max_position_embeddings: -1")),
            "t.pbtxt:11:3: model.max_position_embeddings: -1 is not "
            "positive; set the number of rows of the position table, at "
            "least train.seq_len");
}

TEST(ModelRules, PositionTableCoversSequence) {
  EXPECT_EQ(errorOf(edit(kGpt2, "max_position_embeddings: 32",
                         "max_position_embeddings: 8")),
            "t.pbtxt:11:3: model.max_position_embeddings: 8 is less than "
            "train.seq_len 16; the position table needs a row for every "
            "position, so set at least 16");
}

TEST(ModelRules, RopeThetaOnlyWithRope) {
  EXPECT_EQ(errorOf(edit(kGpt2, "linear_bias: true",
                         "linear_bias: true rope_theta: 10000")),
            "t.pbtxt:13:21: model.rope_theta: applies to ROPE only, but "
            "position_embedding is LEARNED; remove the line");
}

TEST(ModelRules, PositionTableOnlyWithLearned) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA max_position_embeddings: 8192")),
            "t.pbtxt:12:20: model.max_position_embeddings: applies to "
            "LEARNED only, but position_embedding is ROPE, which has no "
            "position table; remove the line (train.seq_len sets the "
            "sequence length)");
}

TEST(ModelRules, PrefixLmNeedsItsLength) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: PREFIX_LM")),
            "t.pbtxt:2:1: model.prefix_length: missing; PREFIX_LM needs the "
            "number of positions that see each other, e.g. prefix_length: "
            "64");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: PREFIX_LM "
                         "prefix_length: 0")),
            "t.pbtxt:12:46: model.prefix_length: 0 is not positive; set the "
            "number of prefix positions, 1 to train.seq_len");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: PREFIX_LM "
                         "prefix_length: 17")),
            "t.pbtxt:12:46: model.prefix_length: 17 is more than "
            "train.seq_len 16; the prefix is part of each sequence, so set "
            "at most 16");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: PREFIX_LM "
                         "prefix_length: 16")),
            "(loaded)");
}

TEST(ModelRules, DocumentMaskNeedsATokenSeparator) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: DOCUMENT")),
            "t.pbtxt:2:1: model.document_separator: missing; DOCUMENT needs "
            "the token id that ends each document, e.g. document_separator: "
            "0");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: DOCUMENT "
                         "document_separator: 256")),
            "t.pbtxt:12:45: model.document_separator: 256 is not a token id; "
            "choose one in 0 .. 255 (vocab_size - 1)");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: DOCUMENT "
                         "document_separator: 0")),
            "(loaded)");
}

TEST(ModelRules, MaskFieldsBelongToTheirMask) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA prefix_length: 4")),
            "t.pbtxt:12:20: model.prefix_length: applies to attention_mask "
            "PREFIX_LM only; remove the line or set attention_mask: "
            "PREFIX_LM");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA attention_mask: PREFIX_LM "
                         "prefix_length: 4 document_separator: 10")),
            "t.pbtxt:12:63: model.document_separator: applies to "
            "attention_mask DOCUMENT only; remove the line or set "
            "attention_mask: DOCUMENT");
}

TEST(ModelRules, RopeThetaPositiveAndFinite) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA rope_theta: -1")),
            "t.pbtxt:12:20: model.rope_theta: -1 is not positive; set the "
            "RoPE base frequency such as 10000 or 500000, or remove the line "
            "for the default 10000");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA rope_theta: nan")),
            "t.pbtxt:12:20: model.rope_theta: nan is not a finite number; set "
            "the RoPE base frequency such as 10000 or 500000, or remove the "
            "line for the default 10000");
}

TEST(ModelRules, NormEpsPositiveAndFinite) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA norm_eps: -1e-5")),
            "t.pbtxt:12:20: model.norm_eps: -1e-05 is not positive; set a "
            "small epsilon such as 1e-5, or remove the line for the default "
            "1e-5");
  // 1e40 is a double, but kernels read the epsilon as fp32.
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA norm_eps: 1e40")),
            "t.pbtxt:12:20: model.norm_eps: 1e+40 is beyond the range of fp32 "
            "(about 3.4e+38); set a small epsilon such as 1e-5, or remove the "
            "line for the default 1e-5");
}

TEST(ModelRules, InitStdPositiveAndFinite) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA\n  init { std: -0.02 }")),
            "t.pbtxt:13:10: model.init.std: -0.02 is not positive; set a "
            "standard deviation such as 0.02, or remove the line for the "
            "default 0.02");
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA",
                         "naming: HF_LLAMA\n  init { std: -inf }")),
            "t.pbtxt:13:10: model.init.std: -inf is not a finite number; set "
            "a standard deviation such as 0.02, or remove the line for the "
            "default 0.02");
}

TEST(ModelRules, ParameterCountOverflow) {
  std::string text =
      edit(kLlama, "hidden_size: 64", "hidden_size: 4611686018427387904");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:2:1: model: the parameter count overflows a 64-bit "
            "integer; vocab_size, hidden_size, ffn_hidden_size and "
            "num_layers describe no trainable model, so check them for "
            "typos\n"
            "t.pbtxt:16:3: train.seq_len: the activations of one micro-batch "
            "(micro_batch_size x seq_len rows of logits, MLP and attention "
            "scores, 4 bytes each) overflow a 64-bit byte count; reduce "
            "seq_len or micro_batch_size");
}

TEST(ModelRules, TrainingStateOverflow) {
  std::string text = edit(kLlama, "hidden_size: 64", "hidden_size: 1048576");
  text = edit(text, "num_layers: 2", "num_layers: 100000");
  text = edit(text, "ffn_hidden_size: 172", "ffn_hidden_size: 1048576");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:2:1: model: the training state of 659707186918719488 "
            "parameters (16 bytes each: fp32 weight, gradient and two AdamW "
            "moments) overflows a 64-bit byte count; check the sizes for "
            "typos");
}

TEST(SpecRules, NameCharacters) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"my model\"")),
            "t.pbtxt:1:1: name: \"my model\" contains ' '; use only letters, "
            "digits, '.', '_' and '-', since the name becomes part of file "
            "names");
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"-t\"")),
            "t.pbtxt:1:1: name: \"-t\" must start with a letter or digit");
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"a\\nb\"")),
            "t.pbtxt:1:1: name: \"a\\x0ab\" contains '\\x0a'; use only "
            "letters, digits, '.', '_' and '-', since the name becomes part "
            "of file names");
}

TEST(SpecRules, NameLength) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"",
                         "name: \"" + std::string(65, 'n') + "\"")),
            "t.pbtxt:1:1: name: is 65 characters long; use at most 64");
}

TEST(SpecRules, MissingMessages) {
  EXPECT_EQ(errorOf("name: \"t\"\n"),
            "t.pbtxt:1:1: model: missing; add a model { ... } block with the "
            "architecture (vocab_size, hidden_size, num_layers, num_heads, "
            "ffn_hidden_size, norm, activation, position_embedding, naming)\n"
            "t.pbtxt:1:1: train: missing; add a train { ... } block with at "
            "least micro_batch_size, seq_len, steps and adamw { lr }");
}

TEST(SpecRules, ParallelDegrees) {
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { tensor_parallel: -2 pipeline_parallel: -4\n"
                    "           data_parallel: -1 virtual_stages: 2000 }\n"),
            "t.pbtxt:20:12: parallel.tensor_parallel: -2 is not a number of "
            "ranks; set 1 to 1024 tensor-parallel ranks\n"
            "t.pbtxt:20:32: parallel.pipeline_parallel: -4 is not a number "
            "of pipeline stages; set 1 to 2^24\n"
            "t.pbtxt:21:12: parallel.data_parallel: -1 is not a number of "
            "ranks; set 1 to 2^24 data-parallel ranks\n"
            "t.pbtxt:21:30: parallel.virtual_stages: 2000 is not a number of "
            "model chunks per rank; set 1 to 1024");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { data_parallel: 2 zero_stage: 4 bucket_mb: -5 "
                    "comm_chunks: 4096 }\n"),
            "t.pbtxt:20:29: parallel.zero_stage: 4 is not a ZeRO stage; set "
            "0 (nothing sharded), 1 (optimizer state), 2 (and gradients) or "
            "3 (and parameters)\n"
            "t.pbtxt:20:43: parallel.bucket_mb: -5 is not a bucket size; set "
            "0 (one collective per gradient) to 1048576 MiB\n"
            "t.pbtxt:20:57: parallel.comm_chunks: 4096 is not a number of "
            "pieces; set 1 (whole collectives) to 1024");
  EXPECT_EQ(errorOf(std::string(kLlama) + "parallel { zero_stage: -1 }\n"),
            "t.pbtxt:20:12: parallel.zero_stage: -1 is not a ZeRO stage; set "
            "0 (nothing sharded), 1 (optimizer state), 2 (and gradients) or "
            "3 (and parameters)");
}

// Tensor parallel splits heads, the FFN and the vocabulary into equal parts,
// and kv heads too or replicates them evenly; its overlap does not yet
// combine with the pipeline; sequence parallel does with BF16.
TEST(SpecRules, TensorParallelLayouts) {
  EXPECT_EQ(errorOf(std::string(kLlama) + "parallel { tensor_parallel: 3 }\n"),
            "t.pbtxt:3:3: model.vocab_size: 256 vocabulary entries (the "
            "embedding and the LM head are split along the vocabulary) do "
            "not split into 3 equal tensor-parallel parts; choose a "
            "tensor_parallel that divides 256\n"
            "t.pbtxt:6:3: model.num_heads: 4 attention heads do not split "
            "into 3 equal tensor-parallel parts; choose a tensor_parallel "
            "that divides 4\n"
            "t.pbtxt:7:3: model.num_kv_heads: 2 kv heads neither split into "
            "3 tensor-parallel parts nor replicate evenly over them; choose "
            "a tensor_parallel that divides 2 or is a multiple of it\n"
            "t.pbtxt:8:3: model.ffn_hidden_size: 172 FFN features do not "
            "split into 3 equal tensor-parallel parts; choose a "
            "tensor_parallel that divides 172");
  // 2 kv heads replicate evenly over 4 ranks.
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "ffn_hidden_size: 172",
                         "ffn_hidden_size: 176") +
                    "parallel { tensor_parallel: 4 }\n"),
            "(loaded)");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { tensor_parallel: 2 pipeline_parallel: 2 "
                    "zero_stage: 1 tp_comm_overlap: true }\n"),
            "(loaded)");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  precision: BF16\n") +
                    "parallel { tensor_parallel: 2 sequence_parallel: true }\n"),
            "(loaded)");
}

// Sequence parallel and the TP overlap need a TP group; the sequence splits
// evenly over it.
TEST(SpecRules, SequenceParallelAndOverlap) {
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { sequence_parallel: true tp_comm_overlap: "
                    "true tp_comm_chunks: 1 }\n"),
            "t.pbtxt:20:12: parallel.sequence_parallel: applies to "
            "tensor_parallel above 1: it splits the sequence over the TP "
            "ranks; set tensor_parallel or remove the line\n"
            "t.pbtxt:20:36: parallel.tp_comm_overlap: applies to "
            "tensor_parallel above 1; set tensor_parallel or remove the "
            "line\n"
            "t.pbtxt:20:58: parallel.tp_comm_chunks: 1 is not a number of "
            "pieces; set 2 to 64 (0: 4, or 2 with sequence_parallel)");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "seq_len: 16", "seq_len: 18") +
                    "parallel { tensor_parallel: 4 sequence_parallel: true }\n"),
            "t.pbtxt:16:3: train.seq_len: 18 positions do not split into 4 "
            "equal sequence-parallel parts; choose a seq_len that is a "
            "multiple of 4");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { tensor_parallel: 2 sequence_parallel: true "
                    "tp_comm_overlap: true }\n"),
            "(loaded)");
}

// Pairing the micro-batches needs the TP overlap, two micro-batches per
// data-parallel rank and step, no pipeline and ZeRO below stage 2.
TEST(SpecRules, PairedMicroBatches) {
  const std::string tp2 = "parallel { tensor_parallel: 2 ";
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  global_batch_size: 4\n") +
                    tp2 + "tp_comm_pair_micro_batches: true }\n"),
            "t.pbtxt:21:31: parallel.tp_comm_pair_micro_batches: pairs the "
            "micro-batches of tp_comm_overlap; set tp_comm_overlap: true or "
            "remove the line");
  EXPECT_EQ(errorOf(std::string(kLlama) + tp2 +
                    "tp_comm_overlap: true tp_comm_pair_micro_batches: true "
                    "}\n"),
            "t.pbtxt:20:53: parallel.tp_comm_pair_micro_batches: needs two "
            "micro-batches per step or more, and global_batch_size 2 is one "
            "micro-batch of 2 per data-parallel rank; set global_batch_size "
            "to 4 or more");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  global_batch_size: 8\n") +
                    tp2 +
                    "data_parallel: 2 zero_stage: 3 tp_comm_overlap: true "
                    "tp_comm_pair_micro_batches: true }\n"),
            "t.pbtxt:21:84: parallel.tp_comm_pair_micro_batches: does not "
            "combine with zero_stage 3 yet: its reduce-scatters and gathers "
            "run inside the micro-batches on a stream of their own; use "
            "zero_stage 0 or 1 or remove the line");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  global_batch_size: 8\n") +
                    tp2 +
                    "pipeline_parallel: 2 tp_comm_overlap: true "
                    "tp_comm_pair_micro_batches: true }\n"),
            "t.pbtxt:21:74: parallel.tp_comm_pair_micro_batches: does not "
            "combine with pipeline_parallel: the pipeline schedule orders the "
            "micro-batches (DualPipeV pairs forward and backward itself); "
            "remove the line");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  global_batch_size: 8\n") +
                    tp2 +
                    "data_parallel: 2 zero_stage: 1 tp_comm_overlap: true "
                    "tp_comm_pair_micro_batches: true }\n"),
            "(loaded)");
}

// Context parallel cuts every sequence into 2 x CP equal chunks; it does
// not yet combine with the pipeline, ZeRO, sequence parallel or the TP
// overlap (its all-gather does with BF16).
TEST(SpecRules, ContextParallelLayouts) {
  EXPECT_EQ(errorOf(std::string(kLlama) + "parallel { context_parallel: 3 }\n"),
            "t.pbtxt:16:3: train.seq_len: 16 positions do not split into 6 "
            "equal chunks (2 x context_parallel); choose a seq_len that is a "
            "multiple of 6");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { context_parallel: -2 cp_comm_type: 7 }\n"),
            "t.pbtxt:20:12: parallel.context_parallel: -2 is not a number of "
            "ranks; set 1 to 1024 context-parallel ranks\n"
            "t.pbtxt:20:33: parallel.cp_comm_type: 7 is not a way of "
            "reaching the keys; set P2P (ring attention) or ALL_GATHER");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { context_parallel: 2 tensor_parallel: 2 "
                    "pipeline_parallel: 2 zero_stage: 1 sequence_parallel: "
                    "true tp_comm_overlap: true }\n"),
            "t.pbtxt:20:51: parallel.pipeline_parallel: pipeline_parallel 2 "
            "does not combine with context_parallel yet; remove it or set "
            "context_parallel: 1\n"
            "t.pbtxt:20:72: parallel.zero_stage: zero_stage 1 (ZeRO shards "
            "over the data-parallel ranks only, while context parallel's "
            "gradients are summed over DP x CP) does not combine with "
            "context_parallel yet; remove it or set context_parallel: 1\n"
            "t.pbtxt:20:86: parallel.sequence_parallel: sequence_parallel "
            "does not combine with context_parallel yet; remove it or set "
            "context_parallel: 1\n"
            "t.pbtxt:20:110: parallel.tp_comm_overlap: tp_comm_overlap does "
            "not combine with context_parallel yet; remove it or set "
            "context_parallel: 1");
  EXPECT_EQ(errorOf(edit(std::string(kLlama), "  steps: 10\n",
                         "  steps: 10\n  precision: BF16\n") +
                    "parallel { context_parallel: 2 cp_comm_type: ALL_GATHER "
                    "}\n"),
            "(loaded)");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { context_parallel: 2 tensor_parallel: 2 "
                    "data_parallel: 2 }\n"),
            "(loaded)");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { context_parallel: 8 tensor_parallel: 4 "
                    "pipeline_parallel: 1024 data_parallel: 1024 }\n"),
            "t.pbtxt:20:1: parallel: tensor_parallel x context_parallel x "
            "pipeline_parallel x data_parallel is 33554432 ranks; a run has "
            "at most 2^24\n"
            "t.pbtxt:20:51: parallel.pipeline_parallel: pipeline_parallel "
            "1024 does not combine with context_parallel yet; remove it or "
            "set context_parallel: 1");
}

// The schedule's and the partition's needs, each at the field to change.
TEST(SpecRules, PipelineLayouts) {
  const std::string batch8 =
      edit(std::string(kLlama), "micro_batch_size: 2\n",
           "micro_batch_size: 1\n  global_batch_size: 8\n");
  EXPECT_EQ(errorOf(std::string(kLlama) + "parallel { pipeline_parallel: 4 }\n"),
            "t.pbtxt:20:12: parallel.pipeline_parallel: the pipeline has 4 "
            "stages but the model only 2 layers: every stage needs a layer "
            "at least; lower pipeline_parallel or virtual_stages");
  EXPECT_EQ(errorOf(batch8 + "parallel { pipeline_parallel: 2 "
                             "pipeline_schedule: DUALPIPE_V virtual_stages: "
                             "2 }\n"),
            "t.pbtxt:21:33: parallel.pipeline_schedule: virtual_stages does "
            "not combine with DUALPIPE_V: its V placement already gives "
            "every rank two chunks (stages r and 2P-1-r); remove "
            "virtual_stages");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { pipeline_parallel: 2 pipeline_schedule: "
                    "DUALPIPE_V }\n"),
            "t.pbtxt:20:33: parallel.pipeline_schedule: DUALPIPE_V needs at "
            "least 2 x pipeline_parallel = 4 micro-batches; there are 1: "
            "raise the global batch or lower the micro-batch size");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { pipeline_parallel: 2 pipeline_layout: "
                    "\"E t | t t L\" }\n"),
            "t.pbtxt:20:33: parallel.pipeline_layout: pipeline_layout \"E t "
            "| t t L\": its t's sum to 3 layers, the model has 2");
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "parallel { pipeline_parallel: 2 virtual_stages: 2 }\n"),
            "t.pbtxt:20:1: parallel.pipeline_schedule: INTERLEAVED needs "
            "the micro-batches to be a multiple of pipeline_parallel (2); "
            "there are 1: make the global batch give 2 micro-batches");
  EXPECT_EQ(errorOf(batch8 + "parallel { pipeline_parallel: 2 "
                             "pipeline_schedule: ZB_H1 pipeline_layout: "
                             "\"E t | t L\" }\n"),
            "(loaded)");
  EXPECT_EQ(errorOf(batch8 + "parallel { pipeline_parallel: 2 "
                             "data_parallel: 2 zero_stage: 2 }\n"),
            "t.pbtxt:21:50: parallel.zero_stage: 2 does not combine with "
            "pipeline_parallel yet: ZeRO stages 2 and 3 reduce inside the "
            "micro-batches; use zero_stage 0 or 1");
  EXPECT_EQ(errorOf(edit(batch8, "naming: HF_LLAMA\n",
                         "naming: HF_LLAMA\n  tie_embeddings: true\n") +
                    "parallel { pipeline_parallel: 2 }\n"),
            "t.pbtxt:13:3: model.tie_embeddings: does not combine with "
            "pipeline_parallel yet: the embedding and the LM head would "
            "share one parameter across pipeline ranks; set "
            "tie_embeddings: false or pipeline_parallel: 1");
}

} // namespace
} // namespace braid::test
