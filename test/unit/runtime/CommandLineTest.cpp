// braid-run's command-line parser, called directly: what each spelling of a
// flag yields, and that no command line makes it throw.
#include <random>
#include <string>
#include <vector>

#include "tools/braid-run/CommandLine.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

CommandLine parsed(const std::vector<std::string> &args,
                   bool embeddedPlan = false) {
  absl::StatusOr<CommandLine> cl = parseCommandLine(args, embeddedPlan);
  EXPECT_TRUE(cl.ok()) << cl.status();
  return cl.ok() ? *cl : CommandLine();
}

std::string refusal(const std::vector<std::string> &args) {
  absl::StatusOr<CommandLine> cl = parseCommandLine(args, false);
  EXPECT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(cl.status().message());
}

TEST(CommandLine, DefaultsWithOnlyPlanAndData) {
  CommandLine cl = parsed({"p.plan", "--data", "d.txt"});
  EXPECT_EQ(cl.planPath, "p.plan");
  EXPECT_EQ(cl.dataPath, "d.txt");
  EXPECT_FALSE(cl.dataFormat.has_value());
  EXPECT_EQ(cl.steps, 0);
  EXPECT_EQ(cl.threads, 0);
  EXPECT_EQ(cl.device, "cpu");
  EXPECT_TRUE(cl.cudaGraphs);
  EXPECT_EQ(cl.peakGflops, 0);
  EXPECT_EQ(cl.saveShardBytes, 5'000'000'000u); // transformers' "5GB"
  EXPECT_FALSE(cl.shuffle || cl.quiet || cl.profile || cl.help);
}

TEST(CommandLine, ValueAfterASpaceOrAnEqualsSign) {
  const std::vector<std::string> spaced = {
      "--data",          "d.bin",   "--data-format",    "uint16",
      "--steps",         "30",      "--stop-after",     "10",
      "--log",           "l.jsonl", "--save-dir",       "ck",
      "--save-interval", "5",       "--resume",         "ck",
      "--allow-change",  "lr",      "--skip-nonfinite", "2",
      "--threads",       "3",       "--device",         "cuda",
      "--cuda-graphs",   "off",     "--peak-gflops",    "12.5",
      "--comm-timeout",  "2.5",     "--emulate-link",   "25:2",
      "--trace",         "tr",      "--emulate-link-axes", "ep,dp"};
  std::vector<std::string> joined;
  for (size_t i = 0; i < spaced.size(); i += 2)
    joined.push_back(spaced[i] + "=" + spaced[i + 1]);
  for (std::vector<std::string> args : {spaced, joined}) {
    args.insert(args.begin(), "p.plan");
    args.insert(args.end(), {"--shuffle", "--quiet", "--profile"});
    CommandLine cl = parsed(args);
    EXPECT_EQ(cl.dataPath, "d.bin");
    EXPECT_EQ(cl.dataFormat, "uint16");
    EXPECT_EQ(cl.steps, 30);
    EXPECT_EQ(cl.stopAfter, 10);
    EXPECT_EQ(cl.logPath, "l.jsonl");
    EXPECT_EQ(cl.traceDir, "tr");
    EXPECT_EQ(cl.saveDir, "ck");
    EXPECT_EQ(cl.saveInterval, 5);
    EXPECT_EQ(cl.resumeDir, "ck");
    EXPECT_EQ(cl.allowChanges, std::set<std::string>{"train.lr"});
    EXPECT_EQ(cl.skipNonfinite, 2);
    EXPECT_EQ(cl.threads, 3);
    EXPECT_EQ(cl.device, "cuda");
    EXPECT_FALSE(cl.cudaGraphs);
    EXPECT_EQ(cl.peakGflops, 12.5);
    EXPECT_EQ(cl.commTimeoutSeconds, 2.5);
    ASSERT_TRUE(cl.emulateLink.has_value());
    EXPECT_EQ(cl.emulateLink->describe(), "25 us, 2 GB/s");
    EXPECT_EQ(cl.emulateLinkAxes, (std::set<std::string>{"dp", "ep"}));
    EXPECT_TRUE(cl.shuffle && cl.quiet && cl.profile);
  }
}

TEST(CommandLine, RepeatedFlags) {
  CommandLine cl = parsed(
      {"p.plan", "--data=a", "--data", "b", "--steps=4", "--steps", "9",
       "--resume", "ck", "--allow-change=lr,steps", "--allow-change", "name"});
  EXPECT_EQ(cl.dataPath, "b");
  EXPECT_EQ(cl.steps, 9);
  EXPECT_EQ(cl.allowChanges,
            (std::set<std::string>{"name", "train.lr", "train.steps"}));
  // Every value is checked, not only the last.
  EXPECT_EQ(refusal({"p.plan", "--data=a", "--steps=x", "--steps=3"}),
            "--steps needs a whole number from 1 to 9223372036854775807, not "
            "\"x\"");
}

TEST(CommandLine, AValueIsTakenAsGiven) {
  // The argument after a flag that takes a value is its value, whatever it
  // looks like; "--flag=" gives an empty one and never takes the next.
  CommandLine cl = parsed({"p.plan", "--data", "--quiet", "--log", "-"});
  EXPECT_EQ(cl.dataPath, "--quiet");
  EXPECT_FALSE(cl.quiet);
  EXPECT_EQ(cl.logPath, "-");
  EXPECT_EQ(parsed({"p.plan", "--data", "a=b"}).dataPath, "a=b");
  EXPECT_EQ(parsed({"p.plan", "--data=a=b"}).dataPath, "a=b");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--log=", "--quiet"}),
            "--log needs a file, not an empty string");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--trace="}),
            "--trace needs a directory, not an empty string");
  // Numbers are decimal, and one past the range is refused, not clamped.
  EXPECT_EQ(parsed({"p.plan", "--data", "d", "--steps", "010"}).steps, 10);
  EXPECT_EQ(
      refusal({"p.plan", "--data", "d", "--steps", "99999999999999999999"}),
      "--steps needs a whole number from 1 to 9223372036854775807, not "
      "\"99999999999999999999\"");
}

TEST(CommandLine, RefusesBadLinksAndTimeouts) {
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--comm-timeout", "0"}),
            "--comm-timeout needs seconds from 0.001 to 604800, not \"0\"");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--emulate-link", "fast"}),
            "--emulate-link: the link \"fast\" is not LATENCY_US:GBPS, e.g. "
            "25:2 for 25 us and 2 GB/s");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--emulate-link", "25:2",
                     "--emulate-link-axes", "ep,xp"}),
            "--emulate-link-axes: \"xp\" is not an axis; name tp, cp, pp, "
            "dp, ep or edp, separated by commas");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--emulate-link-axes", "ep"}),
            "--emulate-link-axes needs --emulate-link");
}

// Shard sizes as transformers' max_shard_size spells them.
TEST(CommandLine, ShardSizes) {
  auto bytes = [](const std::string &size) {
    return parsed({"p.plan", "--data", "d", "--save-dir", "ck",
                   "--save-shard-size", size})
        .saveShardBytes;
  };
  EXPECT_EQ(bytes("5GB"), 5'000'000'000u);
  EXPECT_EQ(bytes("500MB"), 500'000'000u);
  EXPECT_EQ(bytes("3KB"), 3'000u);
  EXPECT_EQ(bytes("1TB"), 1'000'000'000'000u);
  EXPECT_EQ(bytes("3KiB"), 3u << 10);
  EXPECT_EQ(bytes("7MiB"), 7u << 20);
  EXPECT_EQ(bytes("1TiB"), uint64_t{1} << 40);
  EXPECT_EQ(bytes("123"), 123u);
  EXPECT_EQ(bytes("64B"), 64u);
  EXPECT_EQ(parsed({"p.plan", "--data", "d", "--save-dir", "ck",
                    "--save-shard-size=2GiB"})
                .saveShardBytes,
            uint64_t{2} << 30);
  for (const char *bad :
       {"", "0", "0GB", "-5GB", "5 GB", "5gb", "5G", "1.5GB", "GB", "5GBs",
        "18446744073709551616", "20000000000TB"})
    EXPECT_EQ(refusal({"p.plan", "--data", "d", "--save-dir", "ck",
                       "--save-shard-size", bad}),
              std::string("--save-shard-size needs a size of at least one "
                          "byte, such as 5GB, 500MB, 2GiB or 1000000 "
                          "(bytes), not \"") +
                  bad + "\"")
        << bad;
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--save-shard-size", "1GB"}),
            "--save-shard-size needs --save-dir");
}

TEST(CommandLine, PlanArguments) {
  // Whatever follows "--" is a PLAN, even when it begins with "-"; PLANs
  // are taken as given.
  EXPECT_EQ(parsed({"--data", "d", "--", "-odd.plan"}).planPath, "-odd.plan");
  EXPECT_EQ(parsed({"[a,b]", "--data", "d"}).planPath, "[a,b]");
  EXPECT_EQ(parsed({"{}", "--data", "d"}).planPath, "{}");
  EXPECT_EQ(parsed({"-", "--data", "d"}).planPath, "-");
  EXPECT_EQ(refusal({"a.plan", "--data", "d", "--", "b.plan"}),
            "unexpected argument \"b.plan\": braid-run takes one PLAN");
  EXPECT_EQ(parsed({"--data", "d"}, true).planPath, "");
}

TEST(CommandLine, RefusesWhatNoFlagTakes) {
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--bogus=3"}),
            "unknown flag --bogus");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "-5"}), "unknown flag -5");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "-hq"}), "unknown flag -hq");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--Data=x"}),
            "unknown flag --Data");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--threads"}),
            "--threads needs a value");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "-h=1"}), "-h takes no value");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--quiet="}),
            "--quiet takes no value");
  EXPECT_EQ(refusal({"p.plan", "--data", "d", "--shuffle=true"}),
            "--shuffle takes no value");
  // The first error on the command line is the one reported.
  EXPECT_EQ(refusal({"p.plan", "--steps", "x", "--bogus"}),
            "--steps needs a whole number from 1 to 9223372036854775807, not "
            "\"x\"");
  EXPECT_EQ(refusal({"p.plan", "--bogus", "--steps", "x"}),
            "unknown flag --bogus");
  EXPECT_EQ(refusal({"p.plan", "--device", "tpu", "--threads"}),
            "--device must be cpu or cuda, not \"tpu\"");
}

TEST(CommandLine, HelpSkipsTheRequiredArguments) {
  EXPECT_TRUE(parsed({"--help"}).help);
  EXPECT_TRUE(parsed({"-h"}, true).help);
  EXPECT_EQ(refusal({"--help", "--steps", "0"}),
            "--steps needs a whole number from 1 to 9223372036854775807, not "
            "\"0\"");
}

// Command lines drawn from pieces of real and broken ones: each is parsed
// or refused with InvalidArgument, and nothing throws.
TEST(CommandLine, NoCommandLineThrows) {
  const std::vector<std::string> pieces = {"p.plan",
                                           "--data",
                                           "--data=",
                                           "--data=d",
                                           "d",
                                           "--steps",
                                           "--steps=",
                                           "0",
                                           "-1",
                                           "5",
                                           "0x10",
                                           "1e3",
                                           "99999999999999999999",
                                           "nan",
                                           "--shuffle",
                                           "--shuffle=",
                                           "--shuffle=yes",
                                           "--allow-change",
                                           "--allow-change=lr,",
                                           "lr,steps",
                                           "--resume",
                                           "--peak-gflops",
                                           "inf",
                                           "--threads",
                                           "4097",
                                           "--device",
                                           "tpu",
                                           "--cuda-graphs",
                                           "--help",
                                           "-h",
                                           "-h=",
                                           "-hq",
                                           "--",
                                           "-",
                                           "--bogus",
                                           "--bogus=1",
                                           "-x",
                                           "---x",
                                           "--=x",
                                           "-=",
                                           "=",
                                           "[a,b]",
                                           "{}",
                                           "",
                                           "--log==",
                                           "--data\n",
                                           "-\n",
                                           "--save-dir",
                                           "--save-interval",
                                           "--skip-nonfinite",
                                           "--data-format"};
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> args(rng() % 9);
    for (std::string &a : args)
      a = pieces[rng() % pieces.size()];
    absl::StatusOr<CommandLine> cl;
    ASSERT_NO_THROW(cl = parseCommandLine(args, rng() % 2 == 0));
    if (!cl.ok())
      ASSERT_EQ(cl.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

} // namespace
} // namespace braid
