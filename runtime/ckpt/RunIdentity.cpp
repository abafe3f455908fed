#include "runtime/ckpt/RunIdentity.h"

#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/io/Crc32c.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {
namespace {

// The shortest decimal that reads back as exactly `v`: exact, and as the
// user wrote it in the spec ("0.003", not "0.0030000000000000001").
std::string exact(double v) {
  for (int digits = 1; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(text.c_str(), nullptr) == v)
      return text;
  }
  return absl::StrFormat("%.17g", v);
}

} // namespace

std::vector<IdentityField> planIdentity(const plan::Plan &plan) {
  const plan::ModelInfo &m = plan.model();
  const plan::TrainConfig &t = plan.train();
  auto i = [](int64_t v) { return absl::StrCat(v); };
  return {
      {"name", plan.name(), true},
      {"model.family", m.family(), false},
      {"model.vocab_size", i(m.vocab_size()), false},
      {"model.hidden_size", i(m.hidden_size()), false},
      {"model.num_layers", i(m.num_layers()), false},
      {"model.num_heads", i(m.num_heads()), false},
      {"model.num_kv_heads", i(m.num_kv_heads()), false},
      {"model.ffn_hidden_size", i(m.ffn_hidden_size()), false},
      {"model.num_parameters", i(m.num_parameters()), false},
      {"train.seed", absl::StrCat(t.seed()), false},
      {"train.micro_batch_size", i(t.micro_batch_size()), false},
      // Sequences per optimizer step over every rank: what the data position
      // and the schedule depend on, whatever the layout.
      {"train.global_batch_size",
       i(t.micro_batch_size() * t.num_micro_batches() * plan.mesh().dp()),
       false},
      {"train.seq_len", i(t.seq_len()), false},
      {"train.precision", precisionName(t.precision()), false},
      {"train.steps", i(t.steps()), true},
      {"train.lr", exact(t.lr()), true},
      {"train.min_lr", exact(t.min_lr()), true},
      {"train.warmup_steps", i(t.warmup_steps()), true},
      {"train.decay", lrDecayName(t.decay()), true},
      {"train.beta1", exact(t.beta1()), true},
      {"train.beta2", exact(t.beta2()), true},
      {"train.eps", exact(t.eps()), true},
      {"train.weight_decay", exact(t.weight_decay()), true},
      {"train.grad_clip", exact(t.grad_clip()), true},
  };
}

std::string identityFingerprint(const std::vector<IdentityField> &fields) {
  std::string text;
  for (const IdentityField &f : fields)
    absl::StrAppend(&text, f.name, "=", f.value, "\n");
  return crc32cHex(crc32c(text));
}

std::vector<std::string> changeableFieldNames() {
  std::vector<std::string> names;
  for (const IdentityField &f : planIdentity(plan::Plan()))
    if (f.changeable)
      names.push_back(std::string(absl::StripPrefix(f.name, "train.")));
  return names;
}

absl::StatusOr<std::set<std::string>>
parseAllowedChanges(const std::string &list) {
  std::map<std::string, std::string> byName;
  for (const IdentityField &f : planIdentity(plan::Plan()))
    if (f.changeable) {
      byName[f.name] = f.name;
      byName[std::string(absl::StripPrefix(f.name, "train."))] = f.name;
    }
  std::set<std::string> allowed;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    auto it = byName.find(std::string(part));
    if (it == byName.end())
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-change: \"", part,
                       "\" is not a setting that may change "
                       "on resume; these may: ",
                       absl::StrJoin(changeableFieldNames(), ", ")));
    allowed.insert(it->second);
  }
  return allowed;
}

absl::StatusOr<std::vector<IdentityChange>>
compareIdentity(const std::vector<IdentityField> &saved,
                const std::vector<IdentityField> &current,
                const std::set<std::string> &allowed,
                const std::string &origin) {
  std::map<std::string, std::string> savedByName;
  for (const IdentityField &f : saved)
    savedByName[f.name] = f.value;
  std::vector<IdentityChange> changes, refused;
  bool anyUnchangeable = false;
  for (const IdentityField &f : current) {
    auto it = savedByName.find(f.name);
    std::string before = it == savedByName.end() ? "" : it->second;
    if (it != savedByName.end() && before == f.value)
      continue;
    IdentityChange change{f.name, before, f.value};
    if (f.changeable && allowed.count(f.name)) {
      changes.push_back(std::move(change));
    } else {
      anyUnchangeable |= !f.changeable;
      refused.push_back(std::move(change));
    }
  }
  if (refused.empty())
    return changes;
  std::vector<std::string> lines, names;
  for (const IdentityChange &c : refused) {
    lines.push_back(absl::StrCat(
        c.name, " is ",
        c.saved.empty() ? "missing" : absl::StrCat("\"", c.saved, "\""),
        " in the checkpoint but \"", c.current, "\" in the plan"));
    names.push_back(std::string(absl::StripPrefix(c.name, "train.")));
  }
  std::string advice =
      anyUnchangeable
          ? "Resume with the plan it was saved from (the model, batch, "
            "sequence, precision and seed cannot change mid-run)"
          : absl::StrCat("To continue with the new settings, pass "
                         "--allow-change=",
                         absl::StrJoin(names, ","));
  return absl::InvalidArgumentError(absl::StrCat(
      "the checkpoint '", origin, "' does not belong to this plan: ",
      absl::StrJoin(lines, "; "), ". ", advice));
}

} // namespace braid
