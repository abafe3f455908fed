// The bytes of a plan file: what braidc writes and braid-run reads.
//
//   bytes 0..7   "BRAIDPLN"
//   bytes 8..11  CRC-32C of bytes 12.. (little-endian)
//   bytes 12..   a serialised braid.plan.Plan
//
// The checksum makes a flipped or missing byte a refusal naming the file,
// never a plan that parses into something else and trains. Text plans
// (braidc --plan-format=text) are for reading and carry none.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace braid {

// A plan file holding `planBytes` (a serialised braid.plan.Plan).
std::string sealPlan(std::string_view planBytes);

// Where a plan's bytes came from, for messages and advice.
enum class PlanSource { kFile, kEmbedded };

// The serialised plan inside the plan file `bytes`. InvalidArgument, naming
// `origin`, for bytes without the magic (saying so when they are a plan of
// an older format, which braidc wrote without one), or whose checksum does
// not match.
absl::StatusOr<std::string_view> unsealPlan(std::string_view bytes,
                                            const std::string &origin,
                                            PlanSource source);

} // namespace braid
