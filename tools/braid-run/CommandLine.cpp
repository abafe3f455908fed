#include "tools/braid-run/CommandLine.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/ckpt/RunIdentity.h"

namespace braid {
namespace {

absl::Status bad(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status positiveInt(absl::string_view flag, const std::string &text,
                         int64_t max, int64_t *out) {
  int64_t v;
  if (!absl::SimpleAtoi(text, &v) || v <= 0 || v > max)
    return bad(absl::StrCat(flag, " needs a whole number from 1 to ", max,
                            ", not \"", text, "\""));
  *out = v;
  return absl::OkStatus();
}

// Flags that take a value, and where the value goes.
struct ValueFlag {
  std::string_view name;
  absl::Status (*apply)(const std::string &value, CommandLine &cl);
};

constexpr int64_t kMaxInt64 = INT64_MAX;

// A path flag's value; an empty one would silently mean "none".
absl::Status path(absl::string_view flag, const std::string &value,
                  absl::string_view what, std::string *out) {
  if (value.empty())
    return bad(absl::StrCat(flag, " needs ", what, ", not an empty string"));
  *out = value;
  return absl::OkStatus();
}

const ValueFlag kValueFlags[] = {
    {"--data",
     [](const std::string &v, CommandLine &cl) {
       return path("--data", v, "a data file", &cl.dataPath);
     }},
    {"--data-format",
     [](const std::string &v, CommandLine &cl) {
       if (v != "text" && v != "uint16" && v != "int32")
         return bad(absl::StrCat("--data-format must be text, uint16 or "
                                 "int32, not \"",
                                 v, "\""));
       cl.dataFormat = v;
       return absl::OkStatus();
     }},
    {"--steps",
     [](const std::string &v, CommandLine &cl) {
       return positiveInt("--steps", v, kMaxInt64, &cl.steps);
     }},
    {"--stop-after",
     [](const std::string &v, CommandLine &cl) {
       return positiveInt("--stop-after", v, kMaxInt64, &cl.stopAfter);
     }},
    {"--log",
     [](const std::string &v, CommandLine &cl) {
       return path("--log", v, "a file", &cl.logPath);
     }},
    {"--save-dir",
     [](const std::string &v, CommandLine &cl) {
       return path("--save-dir", v, "a directory", &cl.saveDir);
     }},
    {"--save-interval",
     [](const std::string &v, CommandLine &cl) {
       return positiveInt("--save-interval", v, kMaxInt64, &cl.saveInterval);
     }},
    {"--resume",
     [](const std::string &v, CommandLine &cl) {
       return path("--resume", v, "a checkpoint directory", &cl.resumeDir);
     }},
    {"--allow-change",
     [](const std::string &v, CommandLine &cl) {
       absl::StatusOr<std::set<std::string>> fields = parseAllowedChanges(v);
       if (!fields.ok())
         return fields.status();
       cl.allowChanges.insert(fields->begin(), fields->end());
       return absl::OkStatus();
     }},
    {"--skip-nonfinite",
     [](const std::string &v, CommandLine &cl) {
       int64_t n;
       if (!absl::SimpleAtoi(v, &n) || n < 0)
         return bad(absl::StrCat("--skip-nonfinite needs a whole number of "
                                 "steps, 0 or more, not \"",
                                 v, "\""));
       cl.skipNonfinite = n;
       return absl::OkStatus();
     }},
    {"--threads",
     [](const std::string &v, CommandLine &cl) {
       int64_t n;
       if (absl::Status s = positiveInt("--threads", v, 4096, &n); !s.ok())
         return s;
       cl.threads = static_cast<int>(n);
       return absl::OkStatus();
     }},
    {"--device",
     [](const std::string &v, CommandLine &cl) {
       if (v != "cpu" && v != "cuda")
         return bad(
             absl::StrCat("--device must be cpu or cuda, not \"", v, "\""));
       cl.device = v;
       return absl::OkStatus();
     }},
    {"--cuda-graphs",
     [](const std::string &v, CommandLine &cl) {
       if (v != "on" && v != "off")
         return bad(
             absl::StrCat("--cuda-graphs must be on or off, not \"", v, "\""));
       cl.cudaGraphs = v == "on";
       return absl::OkStatus();
     }},
    {"--peak-gflops",
     [](const std::string &v, CommandLine &cl) {
       double x;
       if (!absl::SimpleAtod(v, &x) || !std::isfinite(x) || x <= 0)
         return bad(absl::StrCat("--peak-gflops needs a positive number, not "
                                 "\"",
                                 v, "\""));
       cl.peakGflops = x;
       return absl::OkStatus();
     }},
};

} // namespace

absl::StatusOr<CommandLine>
parseCommandLine(const std::vector<std::string> &args, bool embeddedPlan) {
  CommandLine cl;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    // "--flag=value" or "--flag value".
    std::string name = arg;
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name == "--help" || name == "-h" || name == "--shuffle" ||
        name == "--quiet" || name == "--profile") {
      if (value)
        return bad(absl::StrCat(name, " takes no value"));
      if (name == "--shuffle")
        cl.shuffle = true;
      else if (name == "--quiet")
        cl.quiet = true;
      else if (name == "--profile")
        cl.profile = true;
      else
        cl.help = true;
      continue;
    }
    const ValueFlag *flag = nullptr;
    for (const ValueFlag &f : kValueFlags)
      if (f.name == name)
        flag = &f;
    if (flag == nullptr)
      return bad(absl::StrCat("unknown flag ", name));
    if (!value) {
      if (i + 1 >= args.size())
        return bad(absl::StrCat(name, " needs a value"));
      value = args[++i];
    }
    if (absl::Status s = flag->apply(*value, cl); !s.ok())
      return s;
  }
  if (cl.help)
    return cl;
  if (embeddedPlan) {
    if (!positional.empty())
      return bad(absl::StrCat("this binary carries its own plan and takes no "
                              "PLAN argument, but got \"",
                              positional[0], "\""));
  } else {
    if (positional.empty())
      return bad("missing the PLAN argument (a .plan file written by braidc)");
    if (positional.size() > 1)
      return bad(absl::StrCat("unexpected argument \"", positional[1],
                              "\": braid-run takes one PLAN"));
    cl.planPath = positional[0];
  }
  if (cl.dataPath.empty())
    return bad("missing --data FILE (the training tokens)");
  if (cl.saveInterval > 0 && cl.saveDir.empty())
    return bad("--save-interval needs --save-dir");
  if (!cl.allowChanges.empty() && cl.resumeDir.empty())
    return bad("--allow-change only applies with --resume");
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
      "  --quiet              no start-up report or progress lines\n"
      "  --profile            print the time spent in each kernel at the end\n"
      "  --help               this text\n"
      "\n"
      "Exit status: 0 done, 1 error, 2 bad command line, 128+N stopped by\n"
      "signal N. See docs/braid-run.md.\n");
}

} // namespace braid
