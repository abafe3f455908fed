// What a checkpoint belongs to: the plan settings that change what training
// computes, each by name with its value as text, and a fingerprint of them
// all. A checkpoint stores them; resuming compares them with the plan's and
// refuses a mismatch, naming every field that differs, except for the
// fields a user may change on restart (learning rate, run length, ...) when
// asked to.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/plan/plan.pb.h"

namespace braid {

struct IdentityField {
  std::string name;  // "train.lr": the plan's field path
  // Exact: integers in decimal, doubles as the shortest decimal that reads
  // back as the same double.
  std::string value;
  // May differ on resume when the user allows it (--allow-change).
  bool changeable = false;
};

// The identity of `plan`, in a fixed order.
std::vector<IdentityField> planIdentity(const plan::Plan &plan);

// CRC-32C (hex) of the fields' names and values, in order.
std::string identityFingerprint(const std::vector<IdentityField> &fields);

// The names --allow-change accepts: the changeable fields, with or without
// their "train." prefix.
std::vector<std::string> changeableFieldNames();

// Parses "lr,steps,train.grad_clip" into full field names ("train.lr").
// InvalidArgument naming an unknown or unchangeable name and listing the
// valid ones.
absl::StatusOr<std::set<std::string>>
parseAllowedChanges(const std::string &list);

// One field whose value differs between a checkpoint and the plan.
struct IdentityChange {
  std::string name;
  std::string saved;   // in the checkpoint ("" when it has no such field)
  std::string current; // in the plan
};

// Compares a checkpoint's identity with the plan's. Returns the allowed
// changes (for the run to report); InvalidArgument naming every field that
// differs without being allowed, and how to proceed, otherwise. `origin`
// names the checkpoint in the message.
absl::StatusOr<std::vector<IdentityChange>>
compareIdentity(const std::vector<IdentityField> &saved,
                const std::vector<IdentityField> &current,
                const std::set<std::string> &allowed,
                const std::string &origin);

} // namespace braid
