// The schedule picture. Each rank's row is first painted in the idle colour
// over the whole step, and its spans are drawn on top, so what is left of
// the idle colour is exactly that rank's bubble; the row's bubble time and
// share are written at its right end as well.
#include "passes/pipeline/Timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace braid::pipeline {
namespace {

// Layout, in pixels.
constexpr double kLeft = 64;   // rank labels
constexpr double kRight = 190; // per-row bubble figures
constexpr double kRowHeight = 30;
constexpr double kRowGap = 6;
constexpr double kTitleHeight = 30;
constexpr double kLegendHeight = 26;
constexpr double kAxisHeight = 34;
constexpr double kNoteHeight = 17;
constexpr double kFontSize = 11;
constexpr double kCharWidth = 0.62 * kFontSize; // a digit, roughly
constexpr double kMinPlotWidth = 720;
constexpr double kMaxPlotWidth = 2400;
// The narrowest span should be wide enough for a label like "12.1".
constexpr double kMinSpanWidth = 30;

const char *kStyle = R"(
  text { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; font-size: 11px; fill: #222; }
  .title { font-size: 15px; font-weight: bold; }
  .rank { font-size: 12px; text-anchor: end; dominant-baseline: central; }
  .bubble { font-size: 11px; fill: #9a3b3b; dominant-baseline: central; }
  .label { text-anchor: middle; dominant-baseline: central; }
  .tick { font-size: 10px; fill: #555; text-anchor: middle; }
  .step { font-size: 10px; font-weight: bold; fill: #333; }
  .idle { fill: #f7d9d4; }
  .F { fill: #7fa8dc; }
  .B { fill: #f0b35e; }
  .W { fill: #c3a4e0; }
  .BW { fill: #78c08a; }
  .FB { fill: url(#fbPattern); }
  .later { fill-opacity: 0.6; }
  .span { stroke: #ffffff; stroke-width: 1; }
  .axis { stroke: #555; stroke-width: 1; }
  .grid { stroke: #000; stroke-opacity: 0.08; stroke-width: 1; }
)";

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// A coordinate or a time, short: "12.5", "3", "0.25".
std::string num(double v) {
  char buf[32];
  // Four significant digits, but no exponent for the long steps of a
  // real model in ms.
  std::snprintf(buf, sizeof buf, std::abs(v) >= 1e4 ? "%.0f" : "%.4g",
                std::abs(v) < 1e-9 ? 0.0 : v);
  return buf;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick step of 1, 2 or 5 times a power of ten giving about `target`
// ticks over `range`.
double tickStep(double range, int target) {
  const double raw = range / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= raw)
      return m * power;
  return 10 * power;
}

std::string spanLabel(int64_t mb, int64_t chunk, bool chunked) {
  return chunked ? absl::StrCat(mb, ".", chunk) : absl::StrCat(mb);
}

std::string text(double x, double y, const std::string &cls,
                 const std::string &body) {
  return absl::StrCat("<text x=\"", px(x), "\" y=\"", px(y), "\" class=\"", cls,
                      "\">", escape(body), "</text>\n");
}

} // namespace

std::string timelineSvg(const Schedule &schedule, const Simulation &simulation,
                        const TimelineLabels &labels) {
  const bool chunked = schedule.placement.chunks > 1;
  const double step = simulation.stepTime > 0 ? simulation.stepTime : 1;
  const std::string unit =
      labels.timeUnit.empty() ? std::string() : " " + labels.timeUnit;
  double shortest = step;
  for (const RankResult &rank : simulation.ranks)
    for (const Span &s : rank.spans)
      if (s.end > s.start)
        shortest = std::min(shortest, s.end - s.start);
  const double plotWidth =
      std::clamp(kMinSpanWidth * step / shortest, kMinPlotWidth, kMaxPlotWidth);
  const double scale = plotWidth / step;
  const int64_t rows = simulation.ranks.size();
  const double top = kTitleHeight + kLegendHeight + 8;
  const double rowsBottom = top + rows * (kRowHeight + kRowGap) - kRowGap;
  const double width = kLeft + plotWidth + kRight;
  const double height =
      rowsBottom + kAxisHeight + kNoteHeight * labels.notes.size() + 12;
  auto xOf = [&](double t) { return kLeft + t * scale; };

  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", px(width),
      "\" height=\"", px(height), "\" viewBox=\"0 0 ", px(width), " ",
      px(height), "\">\n<title>", escape(labels.title), "</title>\n<style>",
      kStyle,
      "</style>\n<defs>\n"
      // FB: the forward's colour and the backward's in stripes.
      "<pattern id=\"fbPattern\" width=\"12\" height=\"12\" "
      "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      "<rect width=\"6\" height=\"12\" fill=\"#7fa8dc\"/>"
      "<rect x=\"6\" width=\"6\" height=\"12\" fill=\"#78c08a\"/>"
      "</pattern>\n"
      "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  svg += text(kLeft, 20, "title", labels.title);

  // The legend, one swatch per kind the picture can hold.
  struct Key {
    const char *cls, *name;
  };
  const Key keys[] = {{"F", "F forward"},
                      {"B", "B input grad"},
                      {"W", "W weight grad"},
                      {"BW", "BW whole backward"},
                      {"FB", "FB pair: F above, BW below"},
                      {"idle", "idle (bubble)"}};
  double lx = kLeft;
  const double ly = kTitleHeight + 4;
  for (const Key &k : keys) {
    absl::StrAppend(&svg, "<rect x=\"", px(lx), "\" y=\"", px(ly),
                    "\" width=\"14\" height=\"14\" class=\"", k.cls,
                    "\" stroke=\"#888\" stroke-width=\"0.5\"/>\n");
    svg += text(lx + 19, ly + 11, "key", k.name);
    lx += 19 + kCharWidth * std::string(k.name).size() + 18;
  }
  if (chunked) {
    svg += text(lx, ly + 11, "key",
                "labels: micro-batch.chunk; later chunks paler");
  }

  // The grid and the time axis.
  const double tick = tickStep(step, 12);
  for (double t = 0; t <= step + tick * 1e-6; t += tick) {
    absl::StrAppend(&svg, "<line x1=\"", px(xOf(t)), "\" y1=\"", px(top - 2),
                    "\" x2=\"", px(xOf(t)), "\" y2=\"", px(rowsBottom + 5),
                    "\" class=\"", t == 0 ? "axis" : "grid", "\"/>\n");
    // The step time is written at the axis' end; a tick too close to it
    // keeps its line only.
    if ((step - t) * scale > 24)
      svg += text(xOf(t), rowsBottom + 17, "tick", num(t * labels.timeScale));
  }
  absl::StrAppend(&svg, "<line x1=\"", px(xOf(0)), "\" y1=\"",
                  px(rowsBottom + 5), "\" x2=\"", px(xOf(step)), "\" y2=\"",
                  px(rowsBottom + 5), "\" class=\"axis\"/>\n");
  svg += text(kLeft + plotWidth / 2, rowsBottom + 30, "tick",
              labels.timeUnit.empty()
                  ? std::string("time")
                  : absl::StrCat("time (", labels.timeUnit, ")"));
  svg += text(xOf(step) + 6, rowsBottom + 17, "step",
              absl::StrCat("step ", num(step * labels.timeScale), unit));

  for (int64_t r = 0; r < rows; ++r) {
    const RankResult &rank = simulation.ranks[r];
    const double y = top + r * (kRowHeight + kRowGap);
    const double mid = y + kRowHeight / 2;
    absl::StrAppend(&svg, "<g id=\"rank", r, "\">\n");
    svg += text(kLeft - 8, mid, "rank", absl::StrCat("rank ", r));
    absl::StrAppend(&svg, "<rect x=\"", px(xOf(0)), "\" y=\"", px(y),
                    "\" width=\"", px(plotWidth), "\" height=\"",
                    px(kRowHeight), "\" class=\"idle\"/>\n");
    for (const Span &s : rank.spans) {
      const Entry &e = s.entry;
      const char *kind = kindName(e.kind);
      const double x = xOf(s.start), w = (s.end - s.start) * scale;
      const bool later = chunked && e.kind != Kind::kFB && e.chunk > 0;
      std::string tip = absl::StrCat(kind, " mb ", e.mb, " chunk ", e.chunk);
      if (e.kind == Kind::kFB)
        tip = absl::StrCat("FB: F mb ", e.mb, " chunk ", e.chunk, ", BW mb ",
                           e.bMb, " chunk ", e.bChunk);
      absl::StrAppend(&svg, "<rect x=\"", px(x), "\" y=\"", px(y),
                      "\" width=\"", px(w), "\" height=\"", px(kRowHeight),
                      "\" class=\"span ", kind, later ? " later" : "",
                      "\"><title>", escape(tip), ", ",
                      num(s.start * labels.timeScale), " to ",
                      num(s.end * labels.timeScale), unit, "</title></rect>\n");
      if (e.kind == Kind::kFB) {
        // Two labels, forward above and backward below.
        const std::string f = spanLabel(e.mb, e.chunk, chunked);
        const std::string b = spanLabel(e.bMb, e.bChunk, chunked);
        if (w >= kCharWidth * std::max(f.size(), b.size()) + 4) {
          svg += text(x + w / 2, y + kRowHeight / 4, "label", f);
          svg += text(x + w / 2, y + 3 * kRowHeight / 4, "label", b);
        }
      } else {
        const std::string label = spanLabel(e.mb, e.chunk, chunked);
        if (w >= kCharWidth * label.size() + 4)
          svg += text(x + w / 2, mid, "label", label);
      }
    }
    char share[64];
    std::snprintf(share, sizeof share, " (%.1f%%)", 100 * rank.bubbleRatio);
    svg += text(xOf(step) + 10, mid, "bubble",
                absl::StrCat("bubble ", num(rank.bubble * labels.timeScale),
                             unit, share));
    svg += "</g>\n";
  }

  double ny = rowsBottom + kAxisHeight + 12;
  for (const std::string &note : labels.notes) {
    svg += text(kLeft, ny, "note", note);
    ny += kNoteHeight;
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace braid::pipeline
