#include "runtime/profile/ScheduleTrace.h"

#include <time.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/Json.h"

namespace braid {
namespace {

constexpr const char *kFormat = "braid-schedule-trace-1";

double seconds(ScheduleTrace::Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

} // namespace

const char *schedulePartName(plan::SchedulePart part) {
  switch (part) {
  case plan::PART_F:
    return "F";
  case plan::PART_B:
    return "B";
  case plan::PART_W:
    return "W";
  default:
    return "?";
  }
}

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void ScheduleTrace::beginStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  steps_.push_back({step, seconds(Clock::now()), 0});
}

void ScheduleTrace::endStep() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!steps_.empty())
    steps_.back().end = seconds(Clock::now());
  unpaired_ += static_cast<int64_t>(open_.size());
  open_.clear();
}

void ScheduleTrace::mark(uint32_t stream, const MarkCall &call,
                         Clock::time_point at, double cpuSeconds) {
  const double t = seconds(at);
  std::lock_guard<std::mutex> lock(mutex_);
  auto open = open_.find(stream);
  if (!call.end) {
    if (open != open_.end())
      ++unpaired_;
    open_[stream] = {call, t, cpuSeconds};
    return;
  }
  if (open == open_.end() || open->second.call.part != call.part ||
      open->second.call.stage != call.stage ||
      open->second.call.microBatch != call.microBatch) {
    ++unpaired_;
    return;
  }
  Span span;
  span.step = step_;
  span.stream = stream;
  span.part = call.part;
  span.stage = call.stage;
  span.microBatch = call.microBatch;
  span.begin = open->second.at;
  span.end = t;
  span.cpu = cpuSeconds >= 0 && open->second.cpu >= 0
                 ? cpuSeconds - open->second.cpu
                 : t - open->second.at;
  spans_.push_back(span);
  open_.erase(open);
}

void ScheduleTrace::addSpan(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  span.step = step_;
  spans_.push_back(span);
}

std::vector<ScheduleTrace::Span> ScheduleTrace::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

std::vector<ScheduleTrace::Step> ScheduleTrace::steps() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_;
}

int64_t ScheduleTrace::unpaired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unpaired_;
}

std::string ScheduleTrace::chromeJson(int rank, int worldSize) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string &text) {
    absl::StrAppend(&out, first ? "" : ",\n", text);
    first = false;
  };
  event(absl::StrFormat("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
                        "\"args\":{\"name\":\"rank %d\"}}",
                        rank, rank));
  for (const Step &s : steps_)
    event(absl::StrFormat(
        "{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,"
        "\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d}}",
        s.step, rank, s.begin * 1e6, (s.end - s.begin) * 1e6, s.step));
  for (const Span &s : spans_)
    event(absl::StrFormat(
        "{\"name\":\"%s\",\"cat\":\"schedule\",\"ph\":\"X\",\"pid\":%d,"
        "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d,"
        "\"stage\":%d,\"mb\":%d,\"cpu_us\":%.3f}}",
        schedulePartName(s.part), rank, s.stream + 1, s.begin * 1e6,
        (s.end - s.begin) * 1e6, s.step, s.stage, s.microBatch, s.cpu * 1e6));
  absl::StrAppend(&out,
                  absl::StrFormat("\n],\"displayTimeUnit\":\"ms\",\"otherData\":"
                                  "{\"format\":\"%s\",\"rank\":%d,\"world\":%d}}"
                                  "\n",
                                  kFormat, rank, worldSize));
  return out;
}

namespace {

absl::Status bad(const std::string &name, const std::string &why) {
  return absl::InvalidArgumentError(
      absl::StrCat("the trace '", name, "' ", why));
}

bool number(const JsonValue *v, double *out) {
  if (v == nullptr || v->type != JsonValue::Type::kNumber)
    return false;
  char *end = nullptr;
  *out = std::strtod(v->text.c_str(), &end);
  return end != v->text.c_str() && *end == '\0' && std::isfinite(*out);
}

bool count(const JsonValue *v, int64_t *out) {
  uint64_t u = 0;
  if (v == nullptr || !v->asUint64(&u) || u > (uint64_t{1} << 40))
    return false;
  *out = static_cast<int64_t>(u);
  return true;
}

} // namespace

absl::StatusOr<RankTrace> parseScheduleTrace(const std::string &json,
                                             const std::string &name) {
  absl::StatusOr<JsonValue> doc = parseJson(json);
  if (!doc.ok())
    return bad(name, absl::StrCat("is not JSON: ", doc.status().message()));
  const JsonValue *other = doc->find("otherData");
  const JsonValue *format = other ? other->find("format") : nullptr;
  if (format == nullptr || format->type != JsonValue::Type::kString ||
      format->text != kFormat)
    return bad(name, absl::StrCat("is not a schedule trace of braid-run "
                                  "--trace (otherData.format is not \"",
                                  kFormat, "\")"));
  RankTrace trace;
  int64_t rank = 0, world = 0;
  if (!count(other->find("rank"), &rank) ||
      !count(other->find("world"), &world) || world < 1 ||
      world > (int64_t{1} << 24) || rank >= world)
    return bad(name, "has no valid otherData.rank and otherData.world");
  trace.rank = static_cast<int>(rank);
  trace.worldSize = static_cast<int>(world);
  const JsonValue *events = doc->find("traceEvents");
  if (events == nullptr || events->type != JsonValue::Type::kArray)
    return bad(name, "has no traceEvents array");
  for (size_t i = 0; i < events->array.size(); ++i) {
    const JsonValue &e = events->array[i];
    const JsonValue *cat = e.find("cat");
    if (cat == nullptr || cat->type != JsonValue::Type::kString)
      continue; // metadata
    const JsonValue *args = e.find("args");
    double ts = 0, dur = 0;
    int64_t step = 0;
    if (!number(e.find("ts"), &ts) || !number(e.find("dur"), &dur) ||
        dur < 0 || args == nullptr || !count(args->find("step"), &step))
      return bad(name, absl::StrCat("event ", i, " has no valid ts, dur "
                                                 "and args.step"));
    if (cat->text == "step") {
      trace.steps.push_back({step, ts * 1e-6, (ts + dur) * 1e-6});
      continue;
    }
    if (cat->text != "schedule")
      continue;
    ScheduleTrace::Span span;
    span.step = step;
    const JsonValue *n = e.find("name");
    const std::string part =
        n && n->type == JsonValue::Type::kString ? n->text : "";
    for (plan::SchedulePart p : {plan::PART_F, plan::PART_B, plan::PART_W})
      if (part == schedulePartName(p))
        span.part = p;
    int64_t stage = 0, mb = 0, tid = 0;
    double cpu = 0;
    if (span.part == plan::PART_UNSPECIFIED || !count(e.find("tid"), &tid) ||
        tid < 1 || !count(args->find("stage"), &stage) ||
        !count(args->find("mb"), &mb) || !number(args->find("cpu_us"), &cpu) ||
        cpu < 0)
      return bad(name, absl::StrCat("event ", i, " is not a span of a "
                                                 "schedule part (name F, B "
                                                 "or W; tid, args.stage, "
                                                 "args.mb, args.cpu_us)"));
    span.stream = static_cast<uint32_t>(tid - 1);
    span.stage = static_cast<uint32_t>(stage);
    span.microBatch = mb;
    span.begin = ts * 1e-6;
    span.end = (ts + dur) * 1e-6;
    span.cpu = cpu * 1e-6;
    trace.spans.push_back(span);
  }
  return trace;
}

std::string traceFileName(const std::string &dir, int rank) {
  return absl::StrCat(dir, "/rank-", rank, ".json");
}

absl::StatusOr<std::vector<RankTrace>>
readScheduleTraces(const std::string &dir) {
  std::vector<RankTrace> out;
  for (int rank = 0;; ++rank) {
    const std::string path = traceFileName(dir, rank);
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot read '", path, "'",
          rank == 0 ? absl::StrCat(": is '", dir,
                                   "' a directory braid-run --trace wrote?")
                    : absl::StrCat(", though rank 0's trace says the world "
                                   "has ",
                                   out[0].worldSize, " ranks")));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<RankTrace> trace = parseScheduleTrace(text.str(), path);
    if (!trace.ok())
      return trace.status();
    if (trace->rank != rank ||
        (rank > 0 && trace->worldSize != out[0].worldSize))
      return bad(path, absl::StrCat("says it is rank ", trace->rank, " of ",
                                    trace->worldSize, "; expected rank ", rank,
                                    rank > 0 ? absl::StrCat(" of ",
                                                            out[0].worldSize)
                                             : ""));
    out.push_back(std::move(*trace));
    if (static_cast<int>(out.size()) == out[0].worldSize)
      return out;
  }
}

} // namespace braid
