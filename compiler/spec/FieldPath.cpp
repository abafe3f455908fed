#include "compiler/spec/FieldPath.h"

namespace braid {
namespace {

bool opensMessage(const SpecToken &t) { return t.is('{') || t.is('<'); }
bool closesMessage(const SpecToken &t) { return t.is('}') || t.is('>'); }

// Walks tokens one at a time and keeps the context of the last one. It
// follows the text format grammar loosely: on text protobuf would refuse it
// keeps going with a reasonable guess, since it is used to describe errors.
class PathWalker {
public:
  enum class State {
    kExpectName, // between fields
    kInName,     // inside a bracketed name: [ext.name]
    kAfterName,  // after a field name, before ':' or '{'
    kAfterColon, // after ':', before the value
    kInList,     // inside a [ ... ] value list
  };

  // Whether `token`, met in the current state, is a field name.
  bool isFieldName(const SpecToken &token) const {
    return (state_ == State::kExpectName || state_ == State::kAfterName) &&
           (token.kind == SpecTokenKind::kIdentifier || token.is('['));
  }

  void step(const SpecToken &token) {
    switch (state_) {
    case State::kExpectName:
    case State::kAfterName:
      if (isFieldName(token)) {
        startField(token);
      } else if (token.is(':') && state_ == State::kAfterName) {
        state_ = State::kAfterColon;
      } else if (opensMessage(token) && state_ == State::kAfterName) {
        push(token);
      } else if (closesMessage(token)) {
        pop();
      } else if (state_ == State::kAfterName) {
        // A value without ':' (an error protobuf reports); it ends the field.
        endValue();
      }
      return;
    case State::kInName:
      if (token.is(']')) {
        ctx_.field += "]";
        state_ = State::kAfterName;
      } else {
        ctx_.field += std::string(token.text);
      }
      return;
    case State::kAfterColon:
      if (opensMessage(token)) {
        push(token);
      } else if (token.is('[')) {
        listDepth_ = 1;
        state_ = State::kInList;
      } else if (closesMessage(token)) {
        pop();
      } else if (!token.is('-')) {
        endValue();
      }
      return;
    case State::kInList:
      if (token.is('['))
        ++listDepth_;
      else if (token.is(']') && --listDepth_ == 0)
        endValue();
      else if (opensMessage(token))
        push(token);
      return;
    }
  }

  const FieldContext &context() const { return ctx_; }

private:
  void startField(const SpecToken &token) {
    ctx_.fieldOffset = token.offset;
    if (token.is('[')) {
      ctx_.field = "[";
      state_ = State::kInName;
    } else {
      ctx_.field = std::string(token.text);
      state_ = State::kAfterName;
    }
  }

  void endValue() {
    ctx_.field.clear();
    state_ = State::kExpectName;
  }

  // A message field's body starts; a list around it resumes when it ends.
  void push(const SpecToken &) {
    ctx_.open.push_back({ctx_.field, ctx_.fieldOffset});
    resumeListDepth_.push_back(state_ == State::kInList ? listDepth_ : 0);
    ctx_.field.clear();
    state_ = State::kExpectName;
  }

  void pop() {
    if (ctx_.open.empty()) {
      endValue();
      return;
    }
    ctx_.field = ctx_.open.back().name;
    ctx_.fieldOffset = ctx_.open.back().offset;
    ctx_.open.pop_back();
    listDepth_ = resumeListDepth_.back();
    resumeListDepth_.pop_back();
    if (listDepth_ > 0)
      state_ = State::kInList;
    else
      endValue();
  }

  FieldContext ctx_;
  State state_ = State::kExpectName;
  int listDepth_ = 0;
  std::vector<int> resumeListDepth_;
};

std::string joinNames(const std::vector<OpenMessage> &open) {
  std::string path;
  for (const OpenMessage &m : open) {
    if (!path.empty())
      path += ".";
    path += m.name;
  }
  return path;
}

} // namespace

std::string FieldContext::messagePath() const { return joinNames(open); }

std::string FieldContext::path() const {
  std::string prefix = messagePath();
  if (field.empty())
    return prefix;
  return prefix.empty() ? field : prefix + "." + field;
}

FieldContext fieldContextAt(const std::vector<SpecToken> &tokens,
                            size_t offset) {
  PathWalker walker;
  for (const SpecToken &token : tokens) {
    if (token.offset >= offset) {
      if (token.offset == offset && walker.isFieldName(token))
        walker.step(token);
      break;
    }
    walker.step(token);
  }
  return walker.context();
}

FieldContext fieldContextAtEnd(const std::vector<SpecToken> &tokens) {
  PathWalker walker;
  for (const SpecToken &token : tokens)
    walker.step(token);
  return walker.context();
}

std::optional<size_t> firstFieldNamed(const std::vector<SpecToken> &tokens,
                                      std::string_view path) {
  PathWalker walker;
  for (const SpecToken &token : tokens) {
    bool isName =
        walker.isFieldName(token) && token.kind == SpecTokenKind::kIdentifier;
    walker.step(token);
    if (isName && walker.context().path() == path)
      return token.offset;
  }
  return std::nullopt;
}

std::optional<size_t>
firstBracketDeeperThan(const std::vector<SpecToken> &tokens, int maxDepth) {
  int depth = 0;
  for (const SpecToken &token : tokens) {
    if (token.is('{') || token.is('<') || token.is('[')) {
      if (++depth > maxDepth)
        return token.offset;
    } else if ((token.is('}') || token.is('>') || token.is(']')) && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace braid
