#include "compiler/spec/SpecSchema.h"

#include "absl/strings/str_split.h"
#include "compiler/spec/spec.pb.h"

namespace braid {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

void collectPaths(const Descriptor *message, const std::string &prefix,
                  std::string_view name, std::vector<std::string> &out) {
  for (int i = 0; i < message->field_count(); ++i) {
    const FieldDescriptor *field = message->field(i);
    std::string path =
        prefix.empty() ? field->name() : prefix + "." + field->name();
    if (field->name() == name)
      out.push_back(path);
    if (field->message_type())
      collectPaths(field->message_type(), path, name, out);
  }
}

std::string join(const std::vector<std::string> &items,
                 const std::string &last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += i + 1 == items.size() ? last : ", ";
    out += items[i];
  }
  return out;
}

} // namespace

const FieldDescriptor *fieldAtPath(std::string_view path) {
  const Descriptor *message = spec::ModelSpec::descriptor();
  const FieldDescriptor *field = nullptr;
  for (absl::string_view name :
       absl::StrSplit(absl::string_view(path.data(), path.size()), '.')) {
    if (!message)
      return nullptr;
    field = message->FindFieldByName(std::string(name));
    if (!field)
      return nullptr;
    message = field->message_type();
  }
  return field;
}

const Descriptor *messageAtPath(std::string_view path) {
  if (path.empty())
    return spec::ModelSpec::descriptor();
  const FieldDescriptor *field = fieldAtPath(path);
  return field ? field->message_type() : nullptr;
}

std::vector<std::string> fieldNames(const Descriptor *message) {
  std::vector<std::string> names;
  for (int i = 0; i < message->field_count(); ++i)
    names.push_back(message->field(i)->name());
  return names;
}

std::vector<std::string> pathsOfFieldNamed(std::string_view name) {
  std::vector<std::string> paths;
  collectPaths(spec::ModelSpec::descriptor(), "", name, paths);
  return paths;
}

std::vector<std::string> allowedEnumNames(const EnumDescriptor *type) {
  std::vector<std::string> names;
  for (int i = 0; i < type->value_count(); ++i)
    if (type->value(i)->number() != 0)
      names.push_back(type->value(i)->name());
  return names;
}

std::string joinWithOr(const std::vector<std::string> &items) {
  return join(items, " or ");
}

std::string joinWithAnd(const std::vector<std::string> &items) {
  return join(items, " and ");
}

} // namespace braid
