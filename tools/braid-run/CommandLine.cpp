#include "tools/braid-run/CommandLine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/ckpt/RunIdentity.h"

namespace braid {
namespace {

// Every flag is a CLI11 option. A flag's value is checked and stored by its
// callback as soon as CLI11 parses it, so the first bad value is the one
// reported, in a sentence naming the flag; numbers are read with absl (CLI11
// 2.1 reads "010" as 8 and an overflow as the largest number).

using Text = const std::string &;

[[noreturn]] void refuse(std::string message) {
  throw CLI::ValidationError(std::move(message));
}

int64_t wholeNumber(Text flag, Text text, int64_t max) {
  int64_t v;
  if (!absl::SimpleAtoi(text, &v) || v <= 0 || v > max)
    refuse(absl::StrCat(flag, " needs a whole number from 1 to ", max,
                        ", not \"", text, "\""));
  return v;
}

// A size as transformers' max_shard_size spells it: a whole number of
// bytes, or one followed by KB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024). At least one byte.
uint64_t byteSize(Text flag, Text text) {
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1'000},
      {"MB", 1'000'000},
      {"GB", 1'000'000'000},
      {"TB", 1'000'000'000'000},
      {"KiB", uint64_t{1} << 10},
      {"MiB", uint64_t{1} << 20},
      {"GiB", uint64_t{1} << 30},
      {"TiB", uint64_t{1} << 40}};
  const size_t digits = text.find_first_not_of("0123456789");
  const std::string_view number = std::string_view(text).substr(0, digits);
  const std::string_view unit =
      digits == std::string::npos ? "" : std::string_view(text).substr(digits);
  uint64_t count = 0, bytes = 0;
  for (const auto &[name, scale] : kUnits)
    if (unit == name && !number.empty() &&
        absl::SimpleAtoi(absl::string_view(number.data(), number.size()),
                         &count) &&
        count > 0 && !__builtin_mul_overflow(count, scale, &bytes))
      return bytes;
  refuse(absl::StrCat(flag, " needs a size of at least one byte, such as ",
                      "5GB, 500MB, 2GiB or 1000000 (bytes), not \"", text,
                      "\""));
}

// A path flag's value; an empty one would silently mean "none".
std::string path(Text flag, Text value, absl::string_view what) {
  if (value.empty())
    refuse(absl::StrCat(flag, " needs ", what, ", not an empty string"));
  return value;
}

std::string oneOf(Text flag, Text value, std::vector<std::string> choices) {
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    const std::string last = choices.back();
    choices.pop_back();
    refuse(absl::StrCat(flag, " must be ", absl::StrJoin(choices, ", "), " or ",
                        last, ", not \"", value, "\""));
  }
  return value;
}

void addValueFlag(CLI::App &app, const std::string &flag,
                  std::function<void(Text flag, Text value)> apply) {
  app.add_option(flag,
                 [flag, apply](const CLI::results_t &values) {
                   for (const std::string &v : values)
                     apply(flag, v);
                   return true;
                 })
      ->trigger_on_parse();
}

void addFlags(CLI::App &app, CommandLine &cl) {
  constexpr int64_t kMaxInt64 = INT64_MAX;
  addValueFlag(app, "--data", [&](Text flag, Text v) {
    cl.dataPath = path(flag, v, "a data file");
  });
  addValueFlag(app, "--data-format", [&](Text flag, Text v) {
    cl.dataFormat = oneOf(flag, v, {"text", "uint16", "int32"});
  });
  addValueFlag(app, "--steps", [&](Text flag, Text v) {
    cl.steps = wholeNumber(flag, v, kMaxInt64);
  });
  addValueFlag(app, "--stop-after", [&](Text flag, Text v) {
    cl.stopAfter = wholeNumber(flag, v, kMaxInt64);
  });
  app.add_flag("--shuffle", cl.shuffle);
  addValueFlag(app, "--log", [&](Text flag, Text v) {
    cl.logPath = path(flag, v, "a file");
  });
  addValueFlag(app, "--save-dir", [&](Text flag, Text v) {
    cl.saveDir = path(flag, v, "a directory");
  });
  addValueFlag(app, "--save-interval", [&](Text flag, Text v) {
    cl.saveInterval = wholeNumber(flag, v, kMaxInt64);
  });
  addValueFlag(app, "--save-shard-size", [&](Text flag, Text v) {
    cl.saveShardBytes = byteSize(flag, v);
    cl.saveShardSizeGiven = true;
  });
  addValueFlag(app, "--resume", [&](Text flag, Text v) {
    cl.resumeDir = path(flag, v, "a checkpoint directory");
  });
  addValueFlag(app, "--allow-change", [&](Text, Text v) {
    absl::StatusOr<std::set<std::string>> fields = parseAllowedChanges(v);
    if (!fields.ok())
      refuse(std::string(fields.status().message()));
    cl.allowChanges.insert(fields->begin(), fields->end());
  });
  addValueFlag(app, "--skip-nonfinite", [&](Text flag, Text v) {
    if (!absl::SimpleAtoi(v, &cl.skipNonfinite) || cl.skipNonfinite < 0)
      refuse(absl::StrCat(flag, " needs a whole number of steps, 0 or more, ",
                          "not \"", v, "\""));
  });
  addValueFlag(app, "--threads", [&](Text flag, Text v) {
    cl.threads = static_cast<int>(wholeNumber(flag, v, 4096));
  });
  addValueFlag(app, "--device", [&](Text flag, Text v) {
    cl.device = oneOf(flag, v, {"cpu", "cuda"});
  });
  addValueFlag(app, "--cuda-graphs", [&](Text flag, Text v) {
    cl.cudaGraphs = oneOf(flag, v, {"on", "off"}) == "on";
  });
  addValueFlag(app, "--peak-gflops", [&](Text flag, Text v) {
    if (!absl::SimpleAtod(v, &cl.peakGflops) || !std::isfinite(cl.peakGflops) ||
        cl.peakGflops <= 0)
      refuse(absl::StrCat(flag, " needs a positive number, not \"", v, "\""));
  });
  addValueFlag(app, "--comm-timeout", [&](Text flag, Text v) {
    if (!absl::SimpleAtod(v, &cl.commTimeoutSeconds) ||
        !std::isfinite(cl.commTimeoutSeconds) || cl.commTimeoutSeconds < 0.001 ||
        cl.commTimeoutSeconds > 86400 * 7)
      refuse(absl::StrCat(flag, " needs seconds from 0.001 to 604800, not \"",
                          v, "\""));
  });
  addValueFlag(app, "--emulate-link", [&](Text flag, Text v) {
    absl::StatusOr<LinkModel> link = parseLinkModel(std::string(v));
    if (!link.ok())
      refuse(absl::StrCat(flag, ": ", link.status().message()));
    cl.emulateLink = *link;
  });
  addValueFlag(app, "--emulate-link-axes", [&](Text flag, Text v) {
    for (absl::string_view axis : absl::StrSplit(v, ',')) {
      if (axis != "tp" && axis != "cp" && axis != "pp" && axis != "dp" &&
          axis != "ep" && axis != "edp")
        refuse(absl::StrCat(flag, ": \"", axis,
                            "\" is not an axis; name tp, cp, pp, dp, ep or "
                            "edp, separated by commas"));
      cl.emulateLinkAxes.insert(std::string(axis));
    }
  });
  app.add_flag("--quiet", cl.quiet);
  app.add_flag("--profile", cl.profile);
  addValueFlag(app, "--trace", [&](Text flag, Text v) {
    cl.traceDir = path(flag, v, "a directory");
  });
  app.add_flag("-h,--help", cl.help);
}

// The command line, split for CLI11, which 2.1 reads in ways braid-run does
// not: "--flag=" as a bare "--flag" taking the next argument as its value,
// "-5" or "---x" as a PLAN, the PLAN "[a,b]" as two and "{}" as none. CLI11
// gets the flags, each followed by its value, up to the first argument no
// flag takes (an unknown flag, a value given to a flag that takes none, a
// flag without its value), which `refusal` names; an error CLI11 finds
// before it comes first. The PLAN arguments stay here; "--" ends the flags.
struct Split {
  std::vector<std::string> flags; // last first, as CLI11 takes them
  std::string refusal;
  std::vector<std::string> positional;
};

Split split(const CLI::App &app, const std::vector<std::string> &args) {
  Split s;
  for (size_t i = 0; i < args.size() && s.refusal.empty(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--") {
      s.positional.insert(s.positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      s.positional.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const CLI::Option *flag = app.get_option_no_throw(name);
    const bool takesValue = flag != nullptr && flag->get_expected_max() > 0;
    if (flag == nullptr) {
      s.refusal = absl::StrCat("unknown flag ", name);
    } else if (!takesValue && eq != std::string::npos) {
      s.refusal = absl::StrCat(name, " takes no value");
    } else if (!takesValue) {
      s.flags.push_back(name);
    } else if (eq == std::string::npos) {
      if (i + 1 == args.size())
        s.refusal = absl::StrCat(name, " needs a value");
      else
        s.flags.insert(s.flags.end(), {name, args[++i]});
    } else {
      s.flags.insert(s.flags.end(), {name, arg.substr(eq + 1)});
    }
  }
  std::reverse(s.flags.begin(), s.flags.end());
  return s;
}

absl::Status bad(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

} // namespace

absl::StatusOr<CommandLine>
parseCommandLine(const std::vector<std::string> &args, bool embeddedPlan) {
  CommandLine cl;
  CLI::App app;
  app.set_help_flag(); // --help is a flag of ours; usage() is its text
  addFlags(app, cl);
  Split s = split(app, args);
  try {
    app.parse(s.flags);
  } catch (const CLI::Error &e) {
    return bad(e.what());
  }
  if (!s.refusal.empty())
    return bad(s.refusal);
  if (cl.help)
    return cl;
  if (embeddedPlan) {
    if (!s.positional.empty())
      return bad(absl::StrCat("this binary carries its own plan and takes no "
                              "PLAN argument, but got \"",
                              s.positional[0], "\""));
  } else {
    if (s.positional.empty())
      return bad("missing the PLAN argument (a .plan file written by braidc)");
    if (s.positional.size() > 1)
      return bad(absl::StrCat("unexpected argument \"", s.positional[1],
                              "\": braid-run takes one PLAN"));
    cl.planPath = s.positional[0];
  }
  if (cl.dataPath.empty())
    return bad("missing --data FILE (the training tokens)");
  if (cl.saveInterval > 0 && cl.saveDir.empty())
    return bad("--save-interval needs --save-dir");
  if (cl.saveShardSizeGiven && cl.saveDir.empty())
    return bad("--save-shard-size needs --save-dir");
  if (!cl.allowChanges.empty() && cl.resumeDir.empty())
    return bad("--allow-change only applies with --resume");
  if (!cl.emulateLinkAxes.empty() && !cl.emulateLink)
    return bad("--emulate-link-axes needs --emulate-link");
  return cl;
}

namespace {

// `text` broken at spaces into lines of at most `width` characters, each
// indented by `indent` spaces and ended by a newline.
std::string wrapped(const std::string &text, int indent, size_t width) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty())
    absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

} // namespace

std::string usage(const std::string &program, bool embeddedPlan) {
  return absl::StrCat(
      "usage: ", program, embeddedPlan ? "" : " PLAN",
      " --data FILE [flags]\n"
      "\n"
      "Trains the model of a Braid plan",
      embeddedPlan ? " (embedded in this binary)" : " (written by braidc)",
      " on a token file.\n"
      "\n"
      "  --data FILE          training data\n"
      "  --data-format F      text (one token per byte; default for .txt),\n"
      "                       uint16 or int32 (raw little-endian tokens)\n"
      "  --steps N            total steps; shapes the LR schedule (default:\n"
      "                       the plan's, or the resumed checkpoint's)\n"
      "  --stop-after N       stop after step N (saving if --save-dir)\n"
      "  --shuffle            seeded random window order per epoch\n"
      "  --log FILE           JSON-lines log, one object per step\n"
      "  --save-dir DIR       write checkpoints to DIR/step-NNNNNN\n"
      "  --save-interval N    also save every N steps\n"
      "  --save-shard-size S  split the parameters into shards of at most S\n"
      "                       (e.g. 500MB, 2GiB; default 5GB)\n"
      "  --resume DIR         continue from a checkpoint (or the latest one\n"
      "                       under DIR)\n"
      "  --allow-change LIST  on resume, accept a plan whose settings in\n"
      "                       LIST differ from the checkpoint's:\n",
      wrapped(absl::StrJoin(changeableFieldNames(), ", "), 23, 72),
      "  --skip-nonfinite N   skip up to N steps whose loss or gradient norm\n"
      "                       is not finite (default 0: stop at the first)\n"
      "  --threads N          kernel threads (default: all cores)\n"
      "  --device D           cpu (default) or cuda\n"
      "  --cuda-graphs on|off replay each program as a CUDA graph after its\n"
      "                       first run (default on; --device=cuda only)\n"
      "  --peak-gflops X      peak for MFU instead of measuring sgemm\n"
      "  --comm-timeout S     stop the job when a collective (of several\n"
      "                       ranks, or NCCL's on a GPU) takes longer than S\n"
      "                       seconds (default 300)\n"
      "  --emulate-link L:B   benchmarks: hold each collective for a link of\n"
      "                       L us latency and B GB/s (e.g. 25:2)\n"
      "  --emulate-link-axes A  only along these axes: tp, cp, pp, dp, ep,\n"
      "                       edp, separated by commas (default: all)\n"
      "  --quiet              no start-up report or progress lines\n"
      "  --profile            print the time spent in each kernel at the end\n"
      "  --trace DIR          time each part of the pipeline schedule and\n"
      "                       write DIR/rank-N.json per rank (Chrome trace\n"
      "                       format; braidc --sim-profile reads it)\n"
      "  --help               this text\n"
      "\n"
      "Exit status: 0 done, 1 error, 2 bad command line, 128+N stopped by\n"
      "signal N. See docs/braid-run.md.\n");
}

} // namespace braid
