// Schedule traces (runtime/profile): marks paired into spans, the Chrome
// trace-event file and its reader, and the summary braidc --sim-profile
// takes its costs from.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/profile/ScheduleTrace.h"
#include "runtime/profile/TraceSummary.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using Span = ScheduleTrace::Span;
using test::freshDir;

// Every time below is a sum of powers of two (in seconds), so that a
// span's begin, end and length come out exact.
ScheduleTrace::Clock::time_point at(double seconds) {
  return ScheduleTrace::Clock::time_point(
      std::chrono::duration_cast<ScheduleTrace::Clock::duration>(
          std::chrono::duration<double>(seconds)));
}

MarkCall call(plan::SchedulePart part, uint32_t stage, int64_t mb, bool end) {
  MarkCall c;
  c.part = part;
  c.stage = stage;
  c.microBatch = mb;
  c.end = end;
  return c;
}

Span span(int64_t step, uint32_t stream, plan::SchedulePart part,
          uint32_t stage, int64_t mb, double begin, double end, double cpu) {
  Span s;
  s.step = step;
  s.stream = stream;
  s.part = part;
  s.stage = stage;
  s.microBatch = mb;
  s.begin = begin;
  s.end = end;
  s.cpu = cpu;
  return s;
}

void expectSpan(const Span &s, int64_t step, uint32_t stream,
                plan::SchedulePart part, uint32_t stage, int64_t mb,
                double begin, double end, double cpu) {
  EXPECT_EQ(s.step, step);
  EXPECT_EQ(s.stream, stream);
  EXPECT_EQ(s.part, part);
  EXPECT_EQ(s.stage, stage);
  EXPECT_EQ(s.microBatch, mb);
  EXPECT_DOUBLE_EQ(s.begin, begin);
  EXPECT_DOUBLE_EQ(s.end, end);
  EXPECT_DOUBLE_EQ(s.cpu, cpu);
}

// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos)
    text.replace(pos, from.size(), to);
  return text;
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string errorOf(const absl::Status &status) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

// --- Marks into spans -------------------------------------------------------

TEST(ScheduleTrace, PairsMarksOfInterleavedStreams) {
  ScheduleTrace trace;
  trace.beginStep(3);
  // Stream 0 (a CPU thread: CPU clocks given) and stream 1 (a GPU: none)
  // interleave their marks.
  trace.mark(0, call(plan::PART_F, 0, 0, false), at(10.0), 1.0);
  trace.mark(1, call(plan::PART_W, 1, 2, false), at(10.25), -1);
  trace.mark(0, call(plan::PART_F, 0, 0, true), at(11.0), 1.75);
  // A CPU clock on one mark of a pair only (the begin here, the end
  // below): the span's CPU time is its wall time.
  trace.mark(0, call(plan::PART_B, 0, 0, false), at(11.5), 2.0);
  trace.mark(1, call(plan::PART_W, 1, 2, true), at(12.5), -1);
  trace.mark(1, call(plan::PART_F, 1, 3, false), at(12.5), -1);
  trace.mark(0, call(plan::PART_B, 0, 0, true), at(13.0), -1);
  trace.mark(1, call(plan::PART_F, 1, 3, true), at(14.0), 5.0);
  trace.endStep();

  EXPECT_EQ(trace.unpaired(), 0);
  const std::vector<Span> spans = trace.spans();
  ASSERT_EQ(spans.size(), 4u);
  expectSpan(spans[0], 3, 0, plan::PART_F, 0, 0, 10.0, 11.0, 0.75);
  expectSpan(spans[1], 3, 1, plan::PART_W, 1, 2, 10.25, 12.5, 2.25);
  expectSpan(spans[2], 3, 0, plan::PART_B, 0, 0, 11.5, 13.0, 1.5);
  expectSpan(spans[3], 3, 1, plan::PART_F, 1, 3, 12.5, 14.0, 1.5);

  const std::vector<ScheduleTrace::Step> steps = trace.steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 3);
  EXPECT_GT(steps[0].begin, 0);
  EXPECT_GE(steps[0].end, steps[0].begin);
}

TEST(ScheduleTrace, CountsMarksThatDoNotPair) {
  ScheduleTrace trace;
  trace.beginStep(1);
  // An end without a begin.
  trace.mark(0, call(plan::PART_F, 0, 0, true), at(1.0), -1);
  EXPECT_EQ(trace.unpaired(), 1);
  EXPECT_TRUE(trace.spans().empty());

  // A begin over an open begin: the later one is the one that pairs.
  trace.mark(0, call(plan::PART_F, 0, 0, false), at(2.0), -1);
  trace.mark(0, call(plan::PART_F, 0, 1, false), at(2.5), -1);
  EXPECT_EQ(trace.unpaired(), 2);
  trace.mark(0, call(plan::PART_F, 0, 1, true), at(3.0), -1);
  EXPECT_EQ(trace.unpaired(), 2);
  ASSERT_EQ(trace.spans().size(), 1u);
  expectSpan(trace.spans()[0], 1, 0, plan::PART_F, 0, 1, 2.5, 3.0, 0.5);

  // Ends naming another part, stage or micro-batch leave the begin open.
  trace.mark(0, call(plan::PART_B, 2, 4, false), at(4.0), -1);
  trace.mark(0, call(plan::PART_W, 2, 4, true), at(4.25), -1);
  EXPECT_EQ(trace.unpaired(), 3);
  trace.mark(0, call(plan::PART_B, 1, 4, true), at(4.5), -1);
  EXPECT_EQ(trace.unpaired(), 4);
  trace.mark(0, call(plan::PART_B, 2, 5, true), at(4.75), -1);
  EXPECT_EQ(trace.unpaired(), 5);
  // An end on another stream does not close this stream's begin.
  trace.mark(1, call(plan::PART_B, 2, 4, true), at(4.875), -1);
  EXPECT_EQ(trace.unpaired(), 6);
  EXPECT_EQ(trace.spans().size(), 1u);
  trace.mark(0, call(plan::PART_B, 2, 4, true), at(5.0), -1);
  EXPECT_EQ(trace.unpaired(), 6);
  ASSERT_EQ(trace.spans().size(), 2u);
  expectSpan(trace.spans()[1], 1, 0, plan::PART_B, 2, 4, 4.0, 5.0, 1.0);

  // The end of a step counts the marks still open, and forgets them.
  trace.mark(0, call(plan::PART_F, 0, 6, false), at(6.0), -1);
  trace.mark(2, call(plan::PART_W, 0, 6, false), at(6.0), -1);
  trace.endStep();
  EXPECT_EQ(trace.unpaired(), 8);
  trace.beginStep(2);
  trace.mark(0, call(plan::PART_F, 0, 6, true), at(7.0), -1);
  EXPECT_EQ(trace.unpaired(), 9);
  trace.endStep();
  EXPECT_EQ(trace.unpaired(), 9);
  EXPECT_EQ(trace.spans().size(), 2u);
}

TEST(ScheduleTrace, SpansTakeTheCurrentStep) {
  ScheduleTrace trace;
  // Before any step: step 0.
  trace.mark(0, call(plan::PART_F, 0, 0, false), at(0.5), -1);
  trace.mark(0, call(plan::PART_F, 0, 0, true), at(0.75), -1);
  trace.beginStep(1);
  trace.mark(0, call(plan::PART_F, 0, 0, false), at(1.0), -1);
  trace.mark(0, call(plan::PART_F, 0, 0, true), at(1.5), -1);
  trace.endStep();
  trace.beginStep(7);
  trace.mark(0, call(plan::PART_B, 0, 0, false), at(2.0), -1);
  // A span timed elsewhere: its own step is replaced, the rest kept.
  trace.addSpan(span(99, 3, plan::PART_W, 2, 5, 2.25, 2.75, 0.125));
  trace.mark(0, call(plan::PART_B, 0, 0, true), at(3.0), -1);
  trace.endStep();
  // After the step's end, still that step.
  trace.addSpan(span(-4, 1, plan::PART_F, 1, 6, 4.0, 4.5, 0.5));

  const std::vector<Span> spans = trace.spans();
  ASSERT_EQ(spans.size(), 5u);
  expectSpan(spans[0], 0, 0, plan::PART_F, 0, 0, 0.5, 0.75, 0.25);
  expectSpan(spans[1], 1, 0, plan::PART_F, 0, 0, 1.0, 1.5, 0.5);
  expectSpan(spans[2], 7, 3, plan::PART_W, 2, 5, 2.25, 2.75, 0.125);
  expectSpan(spans[3], 7, 0, plan::PART_B, 0, 0, 2.0, 3.0, 1.0);
  expectSpan(spans[4], 7, 1, plan::PART_F, 1, 6, 4.0, 4.5, 0.5);
  const std::vector<ScheduleTrace::Step> steps = trace.steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 1);
  EXPECT_EQ(steps[1].step, 7);
  EXPECT_LE(steps[0].end, steps[1].begin);
  EXPECT_EQ(trace.unpaired(), 0);
}

// --- The Chrome trace file ---------------------------------------------------

// Two steps on two streams, with every part.
void recordSample(ScheduleTrace &trace) {
  trace.beginStep(1);
  trace.mark(0, call(plan::PART_F, 3, 0, false), at(100.25), 0.5);
  trace.mark(0, call(plan::PART_F, 3, 0, true), at(101.0), 1.0);
  trace.endStep();
  trace.beginStep(2);
  trace.mark(0, call(plan::PART_B, 3, 7, false), at(102.0), 1.0);
  trace.mark(2, call(plan::PART_W, 3, 7, false), at(102.5), -1);
  trace.mark(0, call(plan::PART_B, 3, 7, true), at(103.5), 1.125);
  trace.mark(2, call(plan::PART_W, 3, 7, true), at(104.0), -1);
  // A step long enough that its end is not its begin to the microsecond.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  trace.endStep();
}

// The sample's file as rank `rank` of `world` writes it.
std::string sampleJson(int rank, int world) {
  ScheduleTrace trace;
  recordSample(trace);
  return trace.chromeJson(rank, world);
}

TEST(ScheduleTraceFile, RoundTripKeepsSpansAndSteps) {
  ScheduleTrace trace;
  recordSample(trace);
  const std::string json = trace.chromeJson(1, 4);
  EXPECT_NE(json.find("\"format\":\"braid-schedule-trace-1\""),
            std::string::npos);
  absl::StatusOr<RankTrace> back = parseScheduleTrace(json, "rank-1.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->worldSize, 4);

  ASSERT_EQ(back->spans.size(), 3u);
  expectSpan(back->spans[0], 1, 0, plan::PART_F, 3, 0, 100.25, 101.0, 0.5);
  expectSpan(back->spans[1], 2, 0, plan::PART_B, 3, 7, 102.0, 103.5, 0.125);
  expectSpan(back->spans[2], 2, 2, plan::PART_W, 3, 7, 102.5, 104.0, 1.5);

  // The steps' times come from the steady clock: kept to the microsecond.
  const std::vector<ScheduleTrace::Step> steps = trace.steps();
  ASSERT_EQ(back->steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->steps[i].step, steps[i].step);
    EXPECT_NEAR(back->steps[i].begin, steps[i].begin, 1e-6);
    EXPECT_NEAR(back->steps[i].end, steps[i].end, 1e-6);
  }
  EXPECT_GE(back->steps[1].end - back->steps[1].begin, 0.002);
}

TEST(ScheduleTraceFile, ParsesAHandWrittenTrace) {
  // Metadata and events of other categories are passed over.
  const std::string json =
      "{\"traceEvents\":["
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1},"
      "{\"name\":\"step 4\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":0,"
      "\"tid\":0,\"ts\":2000000,\"dur\":1500000,\"args\":{\"step\":4}},"
      "{\"name\":\"gc\",\"cat\":\"other\",\"ph\":\"X\",\"ts\":1,"
      "\"dur\":1,\"args\":{\"step\":4}},"
      "{\"name\":\"B\",\"cat\":\"schedule\",\"ph\":\"X\",\"pid\":0,"
      "\"tid\":3,\"ts\":2250000,\"dur\":500000,\"args\":{\"step\":4,"
      "\"stage\":1,\"mb\":6,\"cpu_us\":250000}}],"
      "\"otherData\":{\"format\":\"braid-schedule-trace-1\",\"rank\":0,"
      "\"world\":3}}";
  absl::StatusOr<RankTrace> t = parseScheduleTrace(json, "h.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank, 0);
  EXPECT_EQ(t->worldSize, 3);
  ASSERT_EQ(t->steps.size(), 1u);
  EXPECT_EQ(t->steps[0].step, 4);
  EXPECT_DOUBLE_EQ(t->steps[0].begin, 2.0);
  EXPECT_DOUBLE_EQ(t->steps[0].end, 3.5);
  ASSERT_EQ(t->spans.size(), 1u);
  expectSpan(t->spans[0], 4, 2, plan::PART_B, 1, 6, 2.25, 2.75, 0.25);
}

TEST(ScheduleTraceFile, RoundTripKeepsMicroseconds) {
  ScheduleTrace trace;
  trace.beginStep(5);
  trace.addSpan(span(0, 0, plan::PART_F, 0, 1, 12.000001, 12.000003, 0.000002));
  trace.endStep();
  absl::StatusOr<RankTrace> back =
      parseScheduleTrace(trace.chromeJson(0, 1), "t");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->spans.size(), 1u);
  EXPECT_EQ(back->spans[0].step, 5);
  EXPECT_NEAR(back->spans[0].begin, 12.000001, 1e-9);
  EXPECT_NEAR(back->spans[0].end, 12.000003, 1e-9);
  EXPECT_NEAR(back->spans[0].cpu, 0.000002, 1e-9);
}

TEST(ScheduleTraceFile, ParseErrorsNameTheFileAndTheProblem) {
  const std::string good = sampleJson(0, 2);
  ASSERT_TRUE(parseScheduleTrace(good, "t.json").ok());

  EXPECT_EQ(errorOf(parseScheduleTrace("{\"traceEvents\":[", "a.json").status())
                .rfind("the trace 'a.json' is not JSON: ", 0),
            0u);

  std::string msg =
      errorOf(parseScheduleTrace(replaced(good, "braid-schedule-trace-1",
                                          "braid-schedule-trace-0"),
                                 "b.json")
                  .status());
  EXPECT_EQ(msg, "the trace 'b.json' is not a schedule trace of braid-run "
                 "--trace (otherData.format is not "
                 "\"braid-schedule-trace-1\")");
  msg = errorOf(parseScheduleTrace("{\"traceEvents\":[]}", "b2.json").status());
  EXPECT_NE(msg.find("the trace 'b2.json' is not a schedule trace"),
            std::string::npos);

  msg = errorOf(parseScheduleTrace(sampleJson(2, 2), "c.json").status());
  EXPECT_EQ(msg, "the trace 'c.json' has no valid otherData.rank and "
                 "otherData.world");
  msg = errorOf(parseScheduleTrace(sampleJson(0, 0), "c0.json").status());
  EXPECT_EQ(msg, "the trace 'c0.json' has no valid otherData.rank and "
                 "otherData.world");

  // Event 0 names the process; 1 and 2 are the steps; 3 the first span.
  msg =
      errorOf(parseScheduleTrace(
                  replaced(good, "\"name\":\"F\"", "\"name\":\"X\""), "d.json")
                  .status());
  EXPECT_NE(msg.find("the trace 'd.json' event 3 is not a span of a schedule "
                     "part (name F, B or W"),
            std::string::npos)
      << msg;

  msg = errorOf(
      parseScheduleTrace(
          replaced(good, "\"dur\":750000.000", "\"dur\":-750000.000"), "e.json")
          .status());
  EXPECT_EQ(msg, "the trace 'e.json' event 3 has no valid ts, dur and "
                 "args.step");

  msg =
      errorOf(parseScheduleTrace(
                  replaced(good, "\"traceEvents\":[", "\"events\":["), "f.json")
                  .status());
  EXPECT_EQ(msg, "the trace 'f.json' has no traceEvents array");
}

// A world too large for RankTrace::worldSize (an int) is accepted, and
// read back as a world of 0 ranks (2^32) or a negative one (2^31): the
// parser checks otherData.world against 2^40, not INT_MAX.
TEST(ScheduleTraceFile, RefusesAWorldBeyondAnyMesh) {
  for (const char *world : {"4294967296", "2147483648"}) {
    const std::string json = replaced(sampleJson(0, 2), "\"world\":2}",
                                      absl::StrCat("\"world\":", world, "}"));
    absl::StatusOr<RankTrace> t = parseScheduleTrace(json, "w.json");
    EXPECT_FALSE(t.ok()) << world << ": read as a world of "
                         << (t.ok() ? t->worldSize : 0);
    if (!t.ok())
      EXPECT_EQ(t.status().message(),
                "the trace 'w.json' has no valid otherData.rank and "
                "otherData.world");
  }
}

// --- The trace directory -----------------------------------------------------

TEST(ScheduleTraceFile, ReadsEveryRankInOrder) {
  const std::string dir = freshDir("schedule-trace-read");
  EXPECT_EQ(traceFileName(dir, 3), dir + "/rank-3.json");
  ScheduleTrace second;
  second.beginStep(1);
  second.addSpan(span(0, 1, plan::PART_W, 1, 2, 5.0, 5.5, 0.25));
  second.endStep();
  writeFile(traceFileName(dir, 0), sampleJson(0, 2));
  writeFile(traceFileName(dir, 1), second.chromeJson(1, 2));
  // A file past the world the traces state is not read.
  writeFile(traceFileName(dir, 2), "not JSON");

  absl::StatusOr<std::vector<RankTrace>> traces = readScheduleTraces(dir);
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  EXPECT_EQ((*traces)[0].rank, 0);
  EXPECT_EQ((*traces)[0].worldSize, 2);
  EXPECT_EQ((*traces)[0].spans.size(), 3u);
  EXPECT_EQ((*traces)[0].steps.size(), 2u);
  EXPECT_EQ((*traces)[1].rank, 1);
  EXPECT_EQ((*traces)[1].worldSize, 2);
  ASSERT_EQ((*traces)[1].spans.size(), 1u);
  expectSpan((*traces)[1].spans[0], 1, 1, plan::PART_W, 1, 2, 5.0, 5.5, 0.25);
}

TEST(ScheduleTraceFile, RefusesAMissingRank) {
  const std::string dir = freshDir("schedule-trace-missing");
  writeFile(traceFileName(dir, 0), sampleJson(0, 2));
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status()),
            "cannot read '" + dir +
                "/rank-1.json', though rank 0's trace says the world has 2 "
                "ranks");
}

TEST(ScheduleTraceFile, RefusesARankItsNameDisagreesWith) {
  const std::string dir = freshDir("schedule-trace-misnamed");
  writeFile(traceFileName(dir, 0), sampleJson(1, 2));
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status()),
            "the trace '" + dir +
                "/rank-0.json' says it is rank 1 of 2; expected rank 0");

  writeFile(traceFileName(dir, 0), sampleJson(0, 2));
  writeFile(traceFileName(dir, 1), sampleJson(0, 2));
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status()),
            "the trace '" + dir +
                "/rank-1.json' says it is rank 0 of 2; expected rank 1 of 2");

  // The right rank of another world.
  writeFile(traceFileName(dir, 1), sampleJson(1, 3));
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status()),
            "the trace '" + dir +
                "/rank-1.json' says it is rank 1 of 3; expected rank 1 of 2");

  // A file that does not parse: the parser's error, naming the path.
  writeFile(traceFileName(dir, 1), "[1,");
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status())
                .rfind("the trace '" + dir + "/rank-1.json' is not JSON: ", 0),
            0u);
}

TEST(ScheduleTraceFile, AMissingDirectorySuggestsTracing) {
  const std::string dir = freshDir("schedule-trace-absent") + "/none";
  EXPECT_EQ(errorOf(readScheduleTraces(dir).status()),
            "cannot read '" + dir + "/rank-0.json': is '" + dir +
                "' a directory braid-run --trace wrote?");
}

// --- The summary -------------------------------------------------------------

// Two ranks, one stage each, two micro-batches, three steps. Step 1 warms
// up: its numbers are wild, and none of them may reach the summary.
std::vector<RankTrace> twoStageTraces() {
  std::vector<RankTrace> ranks(2);
  ranks[0].rank = 0;
  ranks[1].rank = 1;
  for (RankTrace &r : ranks)
    r.worldSize = 2;
  std::vector<Span> &r0 = ranks[0].spans;
  std::vector<Span> &r1 = ranks[1].spans;
  using plan::PART_B;
  using plan::PART_F;
  using plan::PART_W;

  // Step 1.
  r0.push_back(span(1, 0, PART_F, 0, 0, 0.0, 40.0, 30.0));
  r0.push_back(span(1, 0, PART_F, 0, 1, 40.0, 45.0, 30.0));
  r1.push_back(span(1, 0, PART_F, 1, 0, 40.5, 60.0, 30.0)); // idle: 0.5
  r1.push_back(span(1, 0, PART_F, 1, 1, 60.0, 62.0, 30.0));
  r1.push_back(span(1, 0, PART_B, 1, 0, 62.0, 70.0, 30.0));
  r1.push_back(span(1, 1, PART_W, 1, 0, 70.0, 80.0, 30.0));
  r0.push_back(span(1, 0, PART_B, 0, 0, 80.0, 90.0, 30.0));
  r0.push_back(span(1, 1, PART_W, 0, 0, 90.0, 95.0, 30.0));

  // Step 2. Rank 0: F F . . B+W (overlapped on two streams) B W.
  r0.push_back(span(2, 0, PART_F, 0, 0, 100.0, 101.0, 0.75));
  r0.push_back(span(2, 0, PART_F, 0, 1, 101.0, 102.0, 0.25));
  r0.push_back(span(2, 0, PART_B, 0, 0, 104.0, 105.0, 1.0));
  r0.push_back(span(2, 1, PART_W, 0, 0, 104.5, 105.5, 0.5));
  r0.push_back(span(2, 0, PART_B, 0, 1, 106.0, 107.0, 0.75));
  r0.push_back(span(2, 1, PART_W, 0, 1, 107.0, 107.5, 0.5));
  // Rank 1: its first forward waits for rank 0's (a hand-over of 0.25);
  // its second starts when its first ends, after rank 0's second forward
  // ended (busy, not a hand-over).
  r1.push_back(span(2, 0, PART_F, 1, 0, 101.25, 102.5, 1.0));
  r1.push_back(span(2, 0, PART_F, 1, 1, 102.5, 103.5, 1.0));
  r1.push_back(span(2, 0, PART_B, 1, 0, 103.5, 104.0, 0.5));
  r1.push_back(span(2, 1, PART_W, 1, 0, 103.75, 104.25, 0.25));
  r1.push_back(span(2, 0, PART_B, 1, 1, 104.25, 105.0, 0.5));
  r1.push_back(span(2, 1, PART_W, 1, 1, 105.0, 105.5, 0.25));

  // Step 3: step 2 a hundred seconds on, but for rank 0's last W (1.5
  // long) and rank 1's first F (a hand-over of 0.5, 1.0 long).
  r0.push_back(span(3, 0, PART_F, 0, 0, 200.0, 201.0, 0.75));
  r0.push_back(span(3, 0, PART_F, 0, 1, 201.0, 202.0, 0.25));
  r0.push_back(span(3, 0, PART_B, 0, 0, 204.0, 205.0, 1.0));
  r0.push_back(span(3, 1, PART_W, 0, 0, 204.5, 205.5, 0.5));
  r0.push_back(span(3, 0, PART_B, 0, 1, 206.0, 207.0, 0.75));
  r0.push_back(span(3, 1, PART_W, 0, 1, 207.0, 208.5, 0.5));
  r1.push_back(span(3, 0, PART_F, 1, 0, 201.5, 202.5, 1.0));
  r1.push_back(span(3, 0, PART_F, 1, 1, 202.5, 203.5, 1.0));
  r1.push_back(span(3, 0, PART_B, 1, 0, 203.5, 204.0, 0.5));
  r1.push_back(span(3, 1, PART_W, 1, 0, 203.75, 204.25, 0.25));
  r1.push_back(span(3, 0, PART_B, 1, 1, 204.25, 205.0, 0.5));
  r1.push_back(span(3, 1, PART_W, 1, 1, 205.0, 205.5, 0.25));

  // The host's steps.
  ranks[0].steps = {{1, 0.0, 1000.0}, {2, 99.0, 109.0}, {3, 199.0, 211.0}};
  ranks[1].steps = {{1, 0.0, 900.0}, {2, 99.5, 109.0}, {3, 199.0, 210.0}};
  return ranks;
}

TEST(TraceSummary, SumsUpTheStepsAfterTheFirst) {
  absl::StatusOr<TraceSummary> s = summarizeTraces(twoStageTraces(), 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps, 2);
  ASSERT_EQ(s->stages.size(), 2u);

  // Four samples of each part of each stage (two micro-batches, two
  // steps).
  const StageProfile &s0 = s->stages[0];
  const StageProfile &s1 = s->stages[1];
  for (const PartCost *c : {&s0.f, &s0.b, &s0.w, &s1.f, &s1.b, &s1.w})
    EXPECT_EQ(c->samples, 4);
  EXPECT_DOUBLE_EQ(s0.f.cpu, 0.5); // (0.75 + 0.25) / 2
  EXPECT_DOUBLE_EQ(s0.f.wall, 1.0);
  EXPECT_DOUBLE_EQ(s0.b.cpu, 0.875); // (1 + 0.75) / 2
  EXPECT_DOUBLE_EQ(s0.b.wall, 1.0);
  EXPECT_DOUBLE_EQ(s0.w.cpu, 0.5);
  EXPECT_DOUBLE_EQ(s0.w.wall, 1.0); // (1 + 0.5 + 1 + 1.5) / 4
  EXPECT_DOUBLE_EQ(s1.f.cpu, 1.0);
  EXPECT_DOUBLE_EQ(s1.f.wall, 1.0625); // (1.25 + 1 + 1 + 1) / 4
  EXPECT_DOUBLE_EQ(s1.b.cpu, 0.5);
  EXPECT_DOUBLE_EQ(s1.b.wall, 0.625); // (0.5 + 0.75) / 2
  EXPECT_DOUBLE_EQ(s1.w.cpu, 0.25);
  EXPECT_DOUBLE_EQ(s1.w.wall, 0.5);

  // Windows 7.5 (100 to 107.5) and 8.5 (200 to 208.5); the host's steps
  // 9.75 and 11.5 (means over the ranks).
  EXPECT_DOUBLE_EQ(s->scheduleSeconds, 8.0);
  EXPECT_DOUBLE_EQ(s->stepSeconds, 10.625);

  // Rank 0 is busy 2 + 1.5 + 1.5 = 5 in step 2 (the overlapped B and W
  // count once) and 2 + 1.5 + 2.5 = 6 in step 3; rank 1 from its first
  // forward to its last W: 4.25, then 4.
  ASSERT_EQ(s->busySeconds.size(), 2u);
  ASSERT_EQ(s->bubbleRatio.size(), 2u);
  EXPECT_DOUBLE_EQ(s->busySeconds[0], 5.5);
  EXPECT_DOUBLE_EQ(s->busySeconds[1], 4.125);
  EXPECT_NEAR(s->bubbleRatio[0], (2.5 / 7.5 + 2.5 / 8.5) / 2, 1e-12);
  EXPECT_NEAR(s->bubbleRatio[0], 16.0 / 51.0, 1e-12);
  EXPECT_NEAR(s->bubbleRatio[1], (3.25 / 7.5 + 4.5 / 8.5) / 2, 1e-12);
  EXPECT_NEAR(s->bubbleRatio[1], 491.0 / 1020.0, 1e-12);

  // The first micro-batch's hand-overs, 0.25 and 0.5; the second's
  // receiver was busy until it started.
  EXPECT_EQ(s->handoffSamples, 2);
  EXPECT_DOUBLE_EQ(s->handoffSeconds, 0.375);
}

TEST(TraceSummary, OneStepIsKept) {
  std::vector<RankTrace> ranks = twoStageTraces();
  for (RankTrace &r : ranks) {
    std::vector<Span> kept;
    for (const Span &s : r.spans)
      if (s.step == 3)
        kept.push_back(s);
    r.spans = kept;
  }
  absl::StatusOr<TraceSummary> s = summarizeTraces(ranks, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps, 1);
  EXPECT_EQ(s->stages[0].f.samples, 2);
  EXPECT_DOUBLE_EQ(s->stages[0].w.wall, 1.25); // (1 + 1.5) / 2
  EXPECT_DOUBLE_EQ(s->stages[1].f.wall, 1.0);
  EXPECT_DOUBLE_EQ(s->scheduleSeconds, 8.5);
  EXPECT_DOUBLE_EQ(s->stepSeconds, 11.5);
  EXPECT_DOUBLE_EQ(s->busySeconds[0], 6.0);
  EXPECT_DOUBLE_EQ(s->busySeconds[1], 4.0);
  EXPECT_NEAR(s->bubbleRatio[0], 2.5 / 8.5, 1e-12);
  EXPECT_NEAR(s->bubbleRatio[1], 4.5 / 8.5, 1e-12);
  EXPECT_EQ(s->handoffSamples, 1);
  EXPECT_DOUBLE_EQ(s->handoffSeconds, 0.5);
}

// One stage on one rank, one micro-batch a step; the parts of step `step`
// from `t`, with window `window`.
void addSingleStageStep(RankTrace &r, int64_t step, double t, double window) {
  r.spans.push_back(span(step, 0, plan::PART_F, 0, 0, t, t + 0.25, 0.25));
  r.spans.push_back(span(step, 0, plan::PART_B, 0, 0, t + 0.25, t + 0.5, 0.25));
  r.spans.push_back(
      span(step, 0, plan::PART_W, 0, 0, t + window - 0.25, t + window, 0.25));
}

TEST(TraceSummary, MediansOverTheSteps) {
  std::vector<RankTrace> ranks(1);
  addSingleStageStep(ranks[0], 1, 0.0, 100.0);
  addSingleStageStep(ranks[0], 2, 200.0, 1.0);
  addSingleStageStep(ranks[0], 3, 300.0, 10.0);
  addSingleStageStep(ranks[0], 4, 400.0, 2.0);
  ranks[0].steps = {{1, 0, 500}, {2, 199, 202}, {3, 299, 319}, {4, 399, 403}};
  absl::StatusOr<TraceSummary> s = summarizeTraces(ranks, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps, 3);
  EXPECT_DOUBLE_EQ(s->scheduleSeconds, 2.0); // of 1, 10, 2
  EXPECT_DOUBLE_EQ(s->stepSeconds, 4.0);     // of 3, 20, 4
  EXPECT_DOUBLE_EQ(s->busySeconds[0], 0.75);
  EXPECT_NEAR(s->bubbleRatio[0], (0.25 / 1 + 9.25 / 10 + 1.25 / 2) / 3, 1e-12);
  EXPECT_EQ(s->stages[0].w.samples, 3);
  EXPECT_EQ(s->handoffSamples, 0);
  EXPECT_DOUBLE_EQ(s->handoffSeconds, 0.0);
}

// Two stages, one micro-batch, one step: rank `second`'s stage 1 starts
// 0.5 after stage 0's forward ends.
std::vector<RankTrace> handOverTraces(int numRanks, int second) {
  std::vector<RankTrace> ranks(numRanks);
  for (int r = 0; r < numRanks; ++r) {
    ranks[r].rank = r;
    ranks[r].worldSize = numRanks;
  }
  using plan::PART_B;
  using plan::PART_F;
  using plan::PART_W;
  ranks[0].spans.push_back(span(1, 0, PART_F, 0, 0, 0.0, 1.0, 1.0));
  ranks[second].spans.push_back(span(1, 0, PART_F, 1, 0, 1.5, 2.5, 1.0));
  ranks[second].spans.push_back(span(1, 0, PART_B, 1, 0, 2.5, 3.0, 0.5));
  ranks[second].spans.push_back(span(1, 0, PART_W, 1, 0, 3.0, 3.5, 0.5));
  ranks[0].spans.push_back(span(1, 0, PART_B, 0, 0, 4.0, 4.5, 0.5));
  ranks[0].spans.push_back(span(1, 0, PART_W, 0, 0, 4.5, 5.0, 0.5));
  return ranks;
}

TEST(TraceSummary, HandOversAreBetweenRanks) {
  absl::StatusOr<TraceSummary> apart = summarizeTraces(handOverTraces(2, 1), 2);
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ(apart->steps, 1);
  EXPECT_EQ(apart->handoffSamples, 1);
  EXPECT_DOUBLE_EQ(apart->handoffSeconds, 0.5);
  EXPECT_DOUBLE_EQ(apart->scheduleSeconds, 5.0);
  EXPECT_DOUBLE_EQ(apart->stepSeconds, 0.0); // no host steps traced
  EXPECT_DOUBLE_EQ(apart->busySeconds[0], 2.0);
  EXPECT_DOUBLE_EQ(apart->busySeconds[1], 2.0);
  EXPECT_DOUBLE_EQ(apart->bubbleRatio[0], 0.6);
  EXPECT_DOUBLE_EQ(apart->bubbleRatio[1], 0.6);
  // Stage 1's W follows its B at once (a whole backward): its gradient
  // leaves at the W's end, 3.5, and stage 0's B starts at 4.
  EXPECT_EQ(apart->gradientHandoffSamples, 1);
  EXPECT_DOUBLE_EQ(apart->gradientHandoffSeconds, 0.5);
  // A W that comes later is an entry of its own: the gradient left at the
  // B's end, 3.
  std::vector<RankTrace> split = handOverTraces(2, 1);
  split[1].spans[2].begin = 3.25;
  split[1].spans[2].end = 3.75;
  absl::StatusOr<TraceSummary> zb = summarizeTraces(split, 2);
  ASSERT_TRUE(zb.ok()) << zb.status();
  EXPECT_EQ(zb->gradientHandoffSamples, 1);
  EXPECT_DOUBLE_EQ(zb->gradientHandoffSeconds, 1.0);

  // Both stages on one rank: the hand-over is in memory, not a sample.
  absl::StatusOr<TraceSummary> together =
      summarizeTraces(handOverTraces(1, 0), 2);
  ASSERT_TRUE(together.ok()) << together.status();
  EXPECT_EQ(together->handoffSamples, 0);
  EXPECT_EQ(together->gradientHandoffSamples, 0);
  EXPECT_DOUBLE_EQ(together->handoffSeconds, 0.0);
  EXPECT_DOUBLE_EQ(together->busySeconds[0], 4.0);
  EXPECT_DOUBLE_EQ(together->bubbleRatio[0], 0.2);

  // A receiver that started before the sender ended is no sample either.
  std::vector<RankTrace> early = handOverTraces(2, 1);
  early[1].spans[0].begin = 0.75;
  absl::StatusOr<TraceSummary> overlapping = summarizeTraces(early, 2);
  ASSERT_TRUE(overlapping.ok()) << overlapping.status();
  EXPECT_EQ(overlapping->handoffSamples, 0);

  // A receiver whose span ends between the send and the start was busy.
  std::vector<RankTrace> busy = handOverTraces(2, 1);
  busy[1].spans.push_back(span(1, 2, plan::PART_W, 1, 9, 0.5, 1.25, 0.5));
  absl::StatusOr<TraceSummary> waited = summarizeTraces(busy, 2);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->handoffSamples, 0);
  // One ending exactly at the send leaves it idle.
  busy[1].spans.back().end = 1.0;
  waited = summarizeTraces(busy, 2);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->handoffSamples, 1);
  EXPECT_DOUBLE_EQ(waited->handoffSeconds, 0.5);
}

// A whole backward runs its B and W layer by layer, each part in pieces
// between its marks: a part of a micro-batch is one sample, its pieces
// added up, and its gradient leaves at the end of its last B piece.
TEST(TraceSummary, PartsInPiecesAreOnePart) {
  std::vector<RankTrace> ranks = handOverTraces(2, 1);
  std::vector<Span> &r1 = ranks[1].spans;
  r1.erase(r1.begin() + 1, r1.end());
  using plan::PART_B;
  using plan::PART_W;
  r1.push_back(span(1, 0, PART_B, 1, 0, 2.5, 2.7, 0.2));
  r1.push_back(span(1, 0, PART_W, 1, 0, 2.7, 2.8, 0.1));
  r1.push_back(span(1, 0, PART_B, 1, 0, 2.8, 3.0, 0.25));
  r1.push_back(span(1, 0, PART_W, 1, 0, 3.0, 3.5, 0.5));
  absl::StatusOr<TraceSummary> s = summarizeTraces(ranks, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  const StageProfile &s1 = s->stages[1];
  EXPECT_EQ(s1.b.samples, 1);
  EXPECT_EQ(s1.w.samples, 1);
  EXPECT_DOUBLE_EQ(s1.b.cpu, 0.45);
  EXPECT_NEAR(s1.b.wall, 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(s1.w.cpu, 0.6);
  EXPECT_NEAR(s1.w.wall, 0.6, 1e-12);
  // Sent at 3.0, the last B piece's end; stage 0's B starts at 4.
  EXPECT_EQ(s->gradientHandoffSamples, 1);
  EXPECT_DOUBLE_EQ(s->gradientHandoffSeconds, 1.0);
  EXPECT_DOUBLE_EQ(s->busySeconds[1], 2.0);
}

TEST(TraceSummary, RefusesTracesWithoutSpans) {
  std::vector<RankTrace> ranks(2);
  ranks[0].steps = {{1, 0.0, 1.0}};
  EXPECT_EQ(errorOf(summarizeTraces(ranks, 2).status()),
            "the traces hold no part of a schedule: trace a pipeline plan "
            "(pipeline_parallel above 1) with braid-run --trace");
  EXPECT_EQ(errorOf(summarizeTraces({}, 2).status()),
            "the traces hold no part of a schedule: trace a pipeline plan "
            "(pipeline_parallel above 1) with braid-run --trace");
}

TEST(TraceSummary, RefusesAStageOutsideTheSchedule) {
  EXPECT_EQ(errorOf(summarizeTraces(twoStageTraces(), 1).status()),
            "the trace of rank 1 has a part of stage 1, but the schedule has "
            "1 stages: was it traced from this spec's plan?");
}

TEST(TraceSummary, RefusesAStageMissingAPart) {
  // Stage 1's weight gradients only in the warm-up step.
  std::vector<RankTrace> ranks = twoStageTraces();
  std::vector<Span> kept;
  for (const Span &s : ranks[1].spans)
    if (s.part != plan::PART_W || s.step == 1)
      kept.push_back(s);
  ranks[1].spans = kept;
  EXPECT_EQ(errorOf(summarizeTraces(ranks, 2).status()),
            "the traces have no W of stage 1 in the steps after the first: "
            "was it traced from this spec's plan?");

  // A third stage the traces never reach.
  EXPECT_EQ(errorOf(summarizeTraces(twoStageTraces(), 3).status()),
            "the traces have no F of stage 2 in the steps after the first: "
            "was it traced from this spec's plan?");
}

} // namespace
} // namespace braid
