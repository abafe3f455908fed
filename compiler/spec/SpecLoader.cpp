#include "compiler/spec/SpecLoader.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sys/stat.h>

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "compiler/spec/FieldPath.h"
#include "compiler/spec/ParseErrors.h"
#include "compiler/spec/SpecDefaults.h"
#include "compiler/spec/SpecErrors.h"
#include "compiler/spec/SpecLexer.h"
#include "compiler/spec/SpecLocator.h"
#include "compiler/spec/SpecValidator.h"
#include "compiler/spec/TextPosition.h"

namespace braid {
namespace {

// The deepest bracket nesting handed to protobuf. A spec nests two levels
// (train { adamw { } }); protobuf skips unknown fields recursively, so
// unbounded nesting would exhaust the stack.
constexpr int kMaxNesting = 16;

using google::protobuf::TextFormat;

// Parses `text` into `spec`, or describes every syntax error in `errors`.
bool parseSpec(const std::string &text, const TextPositions &positions,
               const std::vector<SpecToken> &tokens, spec::ModelSpec &spec,
               TextFormat::ParseInfoTree &tree, SpecErrors &errors) {
  ParseErrorCollector collector;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  // Protobuf stops at the first unknown field unless told to skip them; it
  // then reports each one, and the loader reports them all.
  parser.AllowUnknownField(true);
  bool parsed = parser.ParseFromString(text, &spec);
  for (SpecError &e : describeParseErrors(collector, positions, tokens))
    errors.add(e.at, std::move(e.path), std::move(e.message));
  // Protobuf reports every failure it has; this only guards against a
  // silent one.
  if (!parsed && errors.empty())
    errors.add(TextPoint{}, "", "the text could not be parsed");
  return errors.empty();
}

std::string errnoText(int error) {
  std::string text = std::strerror(error);
  if (!text.empty())
    text[0] = static_cast<char>(std::tolower(text[0]));
  return text;
}

absl::Status fileError(int error, const std::string &path) {
  std::string message =
      absl::StrCat(path, ": cannot read the spec file: ", errnoText(error));
  if (error == ENOENT)
    return absl::NotFoundError(
        absl::StrCat(message, "; check the path and the working directory"));
  if (error == EACCES)
    return absl::PermissionDeniedError(
        absl::StrCat(message, "; check the file's permissions"));
  return absl::InvalidArgumentError(message);
}

std::string tooLarge(std::string_view displayName, size_t bytes, bool atLeast) {
  return absl::StrCat(std::string(displayName), ": the spec is ",
                      atLeast ? "over " : "", bytes,
                      " bytes, but specs are limited to ", kMaxSpecBytes,
                      " bytes (a real one is a few kilobytes); is this the "
                      "right file?");
}

// Turns validation findings into positioned errors.
class LocatingSink : public RuleSink {
public:
  LocatingSink(const SpecLocator &locator, SpecErrors &errors)
      : locator_(locator), errors_(errors) {}

  void report(const std::string &path, std::string message) override {
    errors_.add(locator_.locate(path), path, std::move(message));
  }
  bool written(const std::string &path) const override {
    return locator_.written(path);
  }

private:
  const SpecLocator &locator_;
  SpecErrors &errors_;
};

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};

} // namespace

absl::StatusOr<spec::ModelSpec> loadSpecText(std::string_view text,
                                             std::string_view displayName) {
  if (text.size() > kMaxSpecBytes)
    return absl::InvalidArgumentError(
        tooLarge(displayName, text.size(), false));
  TextPositions positions(text);
  std::vector<SpecToken> tokens = lexSpecText(text);
  SpecErrors errors{std::string(displayName)};

  // Some editors save UTF-8 with a byte-order mark, which is not text the
  // spec grammar knows; say what it is rather than "byte 0xef".
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    errors.add(positions.pointAt(0), fieldContextAt(tokens, 0).path(),
               "the file starts with a UTF-8 byte-order mark (bytes EF BB "
               "BF); save it as UTF-8 without a BOM, or remove those three "
               "bytes");
    return errors.toStatus();
  }

  if (std::optional<size_t> deep =
          firstBracketDeeperThan(tokens, kMaxNesting)) {
    errors.add(positions.pointAt(*deep), fieldContextAt(tokens, *deep).path(),
               absl::StrCat("brackets nest more than ", kMaxNesting,
                            " levels deep here; a spec nests at most two "
                            "(train { adamw { ... } }), so close the "
                            "brackets left open"));
    return errors.toStatus();
  }

  spec::ModelSpec spec;
  TextFormat::ParseInfoTree tree;
  if (!parseSpec(std::string(text), positions, tokens, spec, tree, errors))
    return errors.toStatus();

  fillSpecDefaults(spec, displayName);
  SpecLocator locator(tree, positions);
  LocatingSink sink(locator, errors);
  validateSpec(spec, sink);
  if (!errors.empty())
    return errors.toStatus();
  return spec;
}

absl::StatusOr<spec::ModelSpec> loadSpecFile(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return fileError(errno, path);
  if (S_ISDIR(info.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is a directory, not a spec file; name a .pbtxt file"));
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file)
    return fileError(errno, path);
  // Read one byte past the limit to tell "exactly at the limit" from "over".
  std::string text(kMaxSpecBytes + 1, '\0');
  size_t size = std::fread(text.data(), 1, text.size(), file.get());
  if (std::ferror(file.get()))
    return fileError(errno, path);
  if (size > kMaxSpecBytes)
    return absl::InvalidArgumentError(tooLarge(path, kMaxSpecBytes, true));
  text.resize(size);
  return loadSpecText(text, path);
}

} // namespace braid
