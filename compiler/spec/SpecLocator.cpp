#include "compiler/spec/SpecLocator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_split.h"
#include "compiler/spec/spec.pb.h"

namespace braid {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using ParseInfoTree = google::protobuf::TextFormat::ParseInfoTree;

namespace {

// Follows `path` through the parse tree as far as its fields were written.
// Returns how many names of the path were found and the position of the
// last one (1:1 when none was).
std::pair<size_t, TextPoint> follow(const ParseInfoTree &root,
                                    const TextPositions &positions,
                                    std::string_view path) {
  TextPoint best{1, 1};
  size_t found = 0;
  const ParseInfoTree *tree = &root;
  const Descriptor *message = spec::ModelSpec::descriptor();
  for (absl::string_view name :
       absl::StrSplit(absl::string_view(path.data(), path.size()), '.')) {
    if (!tree || !message)
      break;
    const FieldDescriptor *field = message->FindFieldByName(std::string(name));
    if (!field || field->is_repeated())
      break;
    auto where = tree->GetLocation(field, -1);
    if (where.line < 0)
      break;
    best = positions.pointOfProtobuf(where.line, where.column);
    ++found;
    message = field->message_type();
    tree = message ? tree->GetTreeForNested(field, -1) : nullptr;
  }
  return {found, best};
}

size_t countNames(std::string_view path) {
  return path.empty() ? 0 : 1 + std::count(path.begin(), path.end(), '.');
}

} // namespace

TextPoint SpecLocator::locate(std::string_view path) const {
  return follow(tree_, positions_, path).second;
}

bool SpecLocator::written(std::string_view path) const {
  return !path.empty() &&
         follow(tree_, positions_, path).first == countNames(path);
}

} // namespace braid
