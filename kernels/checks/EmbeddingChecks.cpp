// Checks of embedding and embedding_grad_weight.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

std::vector<int64_t> idsThenDim(const TensorDesc &ids, int64_t d) {
  std::vector<int64_t> s = ids.shape;
  s.push_back(d);
  return s;
}

// The optional `vocab_shard` (0 or 1): the table holds one TP rank's
// rows of the vocabulary, which rank only the run knows.
absl::Status checkVocabShard(const LaunchChecker &c) {
  return c.intParamOr("vocab_shard", 0, 0, 1).status();
}

absl::Status checkEmbedding(const KernelSignature &sig) {
  LaunchChecker c("embedding", sig);
  BRAID_KERNEL_TRY(c.inputs({"table", "ids"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand table = c.in(0), ids = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(table));
  BRAID_KERNEL_TRY(c.dtype(ids, DType::kI32));
  BRAID_KERNEL_TRY(c.sameDtype(y, table));
  BRAID_KERNEL_TRY(c.rank(table, 2, "[V, D]"));
  BRAID_KERNEL_TRY(checkVocabShard(c));
  return c.shape(y, idsThenDim(*ids.desc, table.dim(1)),
                 "(the shape of ids, then the table's D)");
}

absl::Status checkEmbeddingGradWeight(const KernelSignature &sig) {
  LaunchChecker c("embedding_grad_weight", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "ids"}));
  BRAID_KERNEL_TRY(c.outputs({"dtable"}));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(checkVocabShard(c));
  Operand dy = c.in(0), ids = c.in(1), dtable = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.dtype(ids, DType::kI32));
  BRAID_KERNEL_TRY(c.gradWeightDtype(dtable, dy));
  BRAID_KERNEL_TRY(c.rank(dtable, 2, "[V, D]"));
  BRAID_KERNEL_TRY(c.shape(dy, idsThenDim(*ids.desc, dtable.dim(1)),
                           "(the shape of ids, then dtable's D)"));
  if (ids.desc->numel() > INT32_MAX)
    return c.error(absl::StrCat(ids.label, " has ", ids.desc->numel(),
                                " elements, more than 2^31 - 1"));
  return absl::OkStatus();
}

// tokens [B, S] and ids [B, S], both i32, and a token id `separator`.
absl::Status checkDocumentIds(const KernelSignature &sig) {
  LaunchChecker c("document_ids", sig);
  BRAID_KERNEL_TRY(c.inputs({"tokens"}));
  BRAID_KERNEL_TRY(c.outputs({"ids"}));
  Operand tokens = c.in(0), ids = c.out(0);
  BRAID_KERNEL_TRY(c.dtype(tokens, DType::kI32));
  BRAID_KERNEL_TRY(c.dtype(ids, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(tokens, 2, "[B, S]"));
  BRAID_KERNEL_TRY(c.sameShape(ids, tokens));
  return c.intParam("separator", 0, INT32_MAX).status();
}

} // namespace

absl::Span<const NamedCheck> embeddingChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"embedding", checkEmbedding},
      {"embedding_grad_weight", checkEmbeddingGradWeight},
      {"document_ids", checkDocumentIds},
  };
  return kChecks;
}

} // namespace braid::checks
