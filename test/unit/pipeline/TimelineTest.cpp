// The schedule picture: well-formed XML (checked by the small parser below),
// a row per rank, a box per span in its kind's colour class, labels and
// escaped text. It also writes 1F1B and interleaved pictures to the test's
// temporary folder, to look at.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "passes/pipeline/Generators.h"
#include "passes/pipeline/Simulate.h"
#include "passes/pipeline/Timeline.h"

namespace braid::pipeline {
namespace {

// Just enough XML for the picture: elements, attributes in double quotes,
// text, the five named entities and numeric ones, a leading <?xml ...?>.
// Anything else (a stray '<' or '&', an unclosed or mismatched tag) is an
// error.
struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text; // the element's own text, unescaped
  std::vector<std::unique_ptr<Element>> children;

  void collect(const std::string &tag,
               std::vector<const Element *> &out) const {
    if (name == tag)
      out.push_back(this);
    for (const auto &c : children)
      c->collect(tag, out);
  }
  std::vector<const Element *> all(const std::string &tag) const {
    std::vector<const Element *> out;
    collect(tag, out);
    return out;
  }
  std::string attr(const std::string &key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? "" : it->second;
  }
};

class Parser {
public:
  explicit Parser(std::string text) : s_(std::move(text)) {}

  // The root element, or null with error() saying why.
  std::unique_ptr<Element> parse() {
    skipSpace();
    if (s_.compare(i_, 5, "<?xml") == 0) {
      const size_t end = s_.find("?>", i_);
      if (end == std::string::npos)
        return fail("unterminated <?xml");
      i_ = end + 2;
    }
    skipSpace();
    std::unique_ptr<Element> root = element();
    skipSpace();
    if (root && i_ != s_.size())
      return fail("content after the root element");
    return root;
  }
  const std::string &error() const { return error_; }

private:
  std::unique_ptr<Element> fail(const std::string &why) {
    if (error_.empty())
      error_ = why + " at offset " + std::to_string(i_);
    return nullptr;
  }
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  std::string name() {
    const size_t begin = i_;
    while (i_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
            s_[i_] == '_' || s_[i_] == ':'))
      ++i_;
    return s_.substr(begin, i_ - begin);
  }
  // Unescapes s_[begin, end), or fails on a bare '<' or an unknown entity.
  bool unescape(size_t begin, size_t end, std::string &out) {
    static const std::map<std::string, char> kNamed = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    for (size_t k = begin; k < end; ++k) {
      if (s_[k] == '<')
        return fail("'<' in text"), false;
      if (s_[k] != '&') {
        out += s_[k];
        continue;
      }
      const size_t semi = s_.find(';', k);
      if (semi == std::string::npos || semi >= end)
        return fail("'&' that starts no entity"), false;
      const std::string entity = s_.substr(k + 1, semi - k - 1);
      if (!entity.empty() && entity[0] == '#')
        out += '?'; // numeric: fine, its value does not matter here
      else if (kNamed.count(entity))
        out += kNamed.at(entity);
      else
        return fail("unknown entity &" + entity + ";"), false;
      k = semi;
    }
    return true;
  }
  std::unique_ptr<Element> element() {
    if (s_.compare(i_, 1, "<") != 0)
      return fail("expected '<'");
    ++i_;
    auto e = std::make_unique<Element>();
    e->name = name();
    if (e->name.empty())
      return fail("element without a name");
    while (true) {
      skipSpace();
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return e;
      }
      if (s_.compare(i_, 1, ">") == 0) {
        ++i_;
        break;
      }
      const std::string key = name();
      if (key.empty() || s_.compare(i_, 2, "=\"") != 0)
        return fail("malformed attribute in <" + e->name + ">");
      i_ += 2;
      const size_t end = s_.find('"', i_);
      if (end == std::string::npos)
        return fail("unterminated attribute value");
      std::string value;
      if (!unescape(i_, end, value))
        return nullptr;
      if (e->attributes.count(key))
        return fail("attribute " + key + " twice");
      e->attributes[key] = value;
      i_ = end + 1;
    }
    // Content: text, children, then the matching end tag.
    while (true) {
      const size_t lt = s_.find('<', i_);
      if (lt == std::string::npos)
        return fail("<" + e->name + "> is never closed");
      if (!unescape(i_, lt, e->text))
        return nullptr;
      i_ = lt;
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        const std::string end = name();
        if (end != e->name)
          return fail("</" + end + "> closes <" + e->name + ">");
        skipSpace();
        if (s_.compare(i_, 1, ">") != 0)
          return fail("malformed end tag");
        ++i_;
        return e;
      }
      std::unique_ptr<Element> child = element();
      if (!child)
        return nullptr;
      e->children.push_back(std::move(child));
    }
  }

  const std::string s_;
  size_t i_ = 0;
  std::string error_;
};

struct Picture {
  Schedule schedule;
  Simulation simulation;
  std::string svg;
  std::unique_ptr<Element> root;
};

Picture draw(Family family, int64_t p, int64_t v, int64_t m,
             const TimelineLabels &labels) {
  Picture out;
  absl::StatusOr<Schedule> s = makeSchedule(family, p, v, m);
  EXPECT_TRUE(s.ok()) << s.status();
  out.schedule = *s;
  CostModel costs;
  costs.stages.assign(s->placement.stages(),
                      StageCosts{1.0 / v, 1.0 / v, 1.0 / v, 0});
  absl::StatusOr<Simulation> sim = simulate(*s, costs);
  EXPECT_TRUE(sim.ok()) << sim.status();
  out.simulation = *sim;
  out.svg = timelineSvg(out.schedule, out.simulation, labels);
  Parser parser(out.svg);
  out.root = parser.parse();
  EXPECT_NE(out.root, nullptr) << parser.error();
  return out;
}

// The kind a box's class names ("span F", "span BW later", ...).
std::string kindOf(const Element &rect) {
  const std::string cls = rect.attr("class");
  if (cls.rfind("span ", 0) != 0)
    return "";
  const size_t end = cls.find(' ', 5);
  return cls.substr(5, end == std::string::npos ? end : end - 5);
}

TEST(TimelineTest, RowsAndBoxes) {
  Picture pic = draw(Family::kOneFOneB, 4, 1, 8,
                     {"1F1B, P=4, M=8", {"stage 3: 1 empty layer"}});
  ASSERT_NE(pic.root, nullptr);
  EXPECT_EQ(pic.root->name, "svg");
  std::vector<const Element *> rows;
  for (const Element *g : pic.root->all("g"))
    if (g->attr("id").rfind("rank", 0) == 0)
      rows.push_back(g);
  ASSERT_EQ(rows.size(), 4u);
  for (size_t r = 0; r < rows.size(); ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r);
    EXPECT_EQ(rows[r]->attr("id"), "rank" + std::to_string(r));
    // One box per span, in run order, in its kind's class, its label the
    // micro-batch alone (one chunk per rank).
    std::vector<std::string> kinds, labels;
    for (const Element *rect : rows[r]->all("rect"))
      if (!kindOf(*rect).empty())
        kinds.push_back(kindOf(*rect));
    std::vector<std::string> want;
    for (const Span &s : pic.simulation.ranks[r].spans)
      want.push_back(kindName(s.entry.kind));
    EXPECT_EQ(kinds, want);
    bool named = false;
    for (const Element *t : rows[r]->all("text")) {
      if (t->text == "rank " + std::to_string(r))
        named = true;
      if (t->attr("class") == "label")
        labels.push_back(t->text);
    }
    EXPECT_TRUE(named);
    ASSERT_FALSE(labels.empty());
    EXPECT_EQ(labels.front(), "0");
    // Every rank of 1F1B, P=4, idles 9 of 33.
    bool bubble = false;
    for (const Element *t : rows[r]->all("text"))
      if (t->text == "bubble 9 (27.3%)")
        bubble = true;
    EXPECT_TRUE(bubble);
  }
  // The legend has every kind, and the note is there.
  const std::string svg = pic.svg;
  for (const char *cls : {"class=\"F\"", "class=\"B\"", "class=\"W\"",
                          "class=\"BW\"", "class=\"FB\"", "class=\"idle\""})
    EXPECT_NE(svg.find(cls), std::string::npos) << cls;
  EXPECT_NE(svg.find(">stage 3: 1 empty layer</text>"), std::string::npos);
}

// With chunks, labels read micro-batch.chunk, as in "3.1".
TEST(TimelineTest, ChunkLabels) {
  Picture pic = draw(Family::kInterleaved, 2, 2, 4, {"interleaved", {}});
  ASSERT_NE(pic.root, nullptr);
  std::vector<std::string> labels;
  for (const Element *t : pic.root->all("text"))
    if (t->attr("class") == "label")
      labels.push_back(t->text);
  ASSERT_GE(labels.size(), 3u);
  EXPECT_EQ(labels[0], "0.0");
  EXPECT_EQ(labels[1], "1.0");
  EXPECT_EQ(labels[2], "0.1");
}

TEST(TimelineTest, EscapesText) {
  const std::string title = "a<b & \"c\" 'd'";
  Picture pic = draw(Family::kGPipe, 2, 1, 2, {title, {"x > y & z"}});
  ASSERT_NE(pic.root, nullptr);
  EXPECT_EQ(pic.svg.find("a<b"), std::string::npos);
  bool titled = false, noted = false;
  for (const Element *t : pic.root->all("text")) {
    titled |= t->text == title;
    noted |= t->text == "x > y & z";
  }
  EXPECT_TRUE(titled);
  EXPECT_TRUE(noted);
}

// The parser itself rejects what a browser would.
TEST(TimelineTest, ParserRejectsBrokenXml) {
  for (const char *bad :
       {"<svg><g></svg>", "<svg>a < b</svg>", "<svg>a & b</svg>",
        "<svg x=\"1\" x=\"2\"/>", "<svg>&nbsp;</svg>", "<svg><g/>"}) {
    Parser parser(bad);
    EXPECT_EQ(parser.parse(), nullptr) << bad;
  }
  Parser good("<?xml version=\"1.0\"?>\n<svg a=\"&lt;\"><g/>t&amp;</svg>\n");
  std::unique_ptr<Element> root = good.parse();
  ASSERT_NE(root, nullptr) << good.error();
  EXPECT_EQ(root->attr("a"), "<");
  EXPECT_EQ(root->text, "t&");
}

// The pictures to look at: 1F1B and interleaved, P = 4, M = 8, in the
// test's temporary folder.
TEST(TimelineTest, WritesExamples) {
  struct Example {
    Family family;
    int64_t v;
    const char *file, *title;
  };
  for (const Example &x :
       {Example{Family::kOneFOneB, 1, "timeline-1f1b.svg", "1F1B, P=4, M=8"},
        Example{Family::kInterleaved, 2, "timeline-interleaved.svg",
                "Interleaved 1F1B, P=4, V=2, M=8"}}) {
    Picture pic = draw(x.family, 4, x.v, 8,
                       {x.title, {"costs per chunk: F = B = W = 1/V"}});
    ASSERT_NE(pic.root, nullptr);
    const std::string path = testing::TempDir() + x.file;
    std::ofstream(path) << pic.svg;
    std::printf("wrote %s\n", path.c_str());
  }
}

} // namespace
} // namespace braid::pipeline
