// Questions about the spec schema (spec.proto) asked by field path, the
// dotted names a user writes: "model.init.std", "train.adamw".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>

namespace braid {

// The message type at `path`, starting from ModelSpec: "" is ModelSpec,
// "model" is Architecture, "train.adamw" is AdamW. nullptr when the path
// does not name a message field.
const google::protobuf::Descriptor *messageAtPath(std::string_view path);

// The field at `path` ("model.norm"), or nullptr.
const google::protobuf::FieldDescriptor *fieldAtPath(std::string_view path);

// The field names of `message`, in declaration order.
std::vector<std::string>
fieldNames(const google::protobuf::Descriptor *message);

// Every path in the schema whose last name is `name`, in declaration order;
// used to tell a user that a field belongs in another message.
std::vector<std::string> pathsOfFieldNamed(std::string_view name);

// The value names a user may write for `type`: all but the zero value,
// which every enum of the schema reserves for "not set".
std::vector<std::string>
allowedEnumNames(const google::protobuf::EnumDescriptor *type);

// "A", "A or B", "A, B or C".
std::string joinWithOr(const std::vector<std::string> &items);

// "A", "A and B", "A, B and C".
std::string joinWithAnd(const std::vector<std::string> &items);

} // namespace braid
