// braid-run as a user meets it: command-line errors and their exit codes, a
// training run with a log and checkpoints, resuming through the command
// line, self-contained binaries, and SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/Json.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/plan/EmbeddedPlan.h"
#include "runtime/plan/PlanFile.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string output; // stdout and stderr together
};

std::string tempDir(const std::string &name) {
  fs::path dir = fs::path(test::scratchDir()) / ("cli-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

// Runs `exe` with `args` (each single-quoted for the shell).
Result run(const std::vector<std::string> &args,
           const std::string &exe = BRAID_RUN_EXE) {
  std::string cmd = "'" + exe + "'";
  for (const std::string &a : args)
    cmd += " '" + a + "'";
  const std::string out = test::scratchDir() + "/cli-output.txt";
  int status = std::system((cmd + " > '" + out + "' 2>&1").c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = readText(out);
  return r;
}

std::string shakespeare() {
  return std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt";
}

std::string writePlan(const std::string &dir) {
  std::string path = dir + "/tiny.plan";
  std::ofstream(path, std::ios::binary)
      << sealPlan(test::tinyModelPlan().SerializeAsString());
  return path;
}

void expectUsageError(const std::vector<std::string> &args,
                      const std::string &message) {
  Result r = run(args);
  EXPECT_EQ(r.code, 2) << r.output;
  // The message first, then a blank line and the usage text.
  EXPECT_EQ(r.output.rfind("braid-run: " + message, 0), 0u) << "output:\n"
                                                            << r.output;
  EXPECT_NE(r.output.find("\n\nusage: "), std::string::npos) << r.output;
}

TEST(BraidRunCli, RefusesBadCommandLinesWithUsage) {
  const std::string data = shakespeare();
  expectUsageError({}, "missing the PLAN argument (a .plan file written by "
                       "braidc)");
  expectUsageError({"p.plan"}, "missing --data FILE (the training tokens)");
  expectUsageError({"p.plan", "--data", data, "--bogus"},
                   "unknown flag --bogus");
  expectUsageError({"p.plan", "--data"}, "--data needs a value");
  expectUsageError({"p.plan", "--data", data, "--threads"},
                   "--threads needs a value");
  expectUsageError({"p.plan", "--data=" + data, "--bogus=1"},
                   "unknown flag --bogus");
  expectUsageError({"p.plan", "--data", data, "--peak-gflops=fast"},
                   "--peak-gflops needs a positive number, not \"fast\"");
  expectUsageError({"p.plan", "--data", data, "--steps", "abc"},
                   "--steps needs a whole number from 1 to "
                   "9223372036854775807, not \"abc\"");
  expectUsageError({"p.plan", "--data", data, "--steps=0"},
                   "--steps needs a whole number from 1 to "
                   "9223372036854775807, not \"0\"");
  expectUsageError({"p.plan", "--data", data, "--stop-after", "-3"},
                   "--stop-after needs a whole number");
  expectUsageError({"p.plan", "--data", data, "--threads", "5000"},
                   "--threads needs a whole number from 1 to 4096, not "
                   "\"5000\"");
  expectUsageError({"p.plan", "--data", data, "--peak-gflops", "fast"},
                   "--peak-gflops needs a positive number, not \"fast\"");
  expectUsageError({"p.plan", "--data", data, "--device", "tpu"},
                   "--device must be cpu or cuda, not \"tpu\"");
  expectUsageError({"p.plan", "--data", data, "--cuda-graphs", "maybe"},
                   "--cuda-graphs must be on or off, not \"maybe\"");
  expectUsageError({"p.plan", "--data", data, "--data-format", "utf8"},
                   "--data-format must be text, uint16 or int32, not "
                   "\"utf8\"");
  expectUsageError({"p.plan", "--data", data, "--shuffle=yes"},
                   "--shuffle takes no value");
  expectUsageError({"p.plan", "--data", data, "--quiet=1"},
                   "--quiet takes no value");
  expectUsageError({"p.plan", "--data", data, "--profile=on"},
                   "--profile takes no value");
  expectUsageError({"p.plan", "--data", data, "--save-dir", "d",
                    "--save-interval", "often"},
                   "--save-interval needs a whole number");
  expectUsageError({"p.plan", "--data", data, "--save-interval", "10"},
                   "--save-interval needs --save-dir");
  expectUsageError({"a.plan", "b.plan", "--data", data},
                   "unexpected argument \"b.plan\": braid-run takes one PLAN");
}

TEST(BraidRunCli, HelpDescribesEveryFlag) {
  Result r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char *flag :
       {"--data FILE", "--data-format", "--steps N", "--stop-after N",
        "--shuffle", "--log FILE", "--save-dir DIR", "--save-interval N",
        "--save-shard-size S", "--resume DIR", "--allow-change LIST",
        "--skip-nonfinite N", "--threads N", "--device", "--cuda-graphs on|off",
        "--peak-gflops X", "--quiet", "--profile", "--trace DIR", "--help"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  EXPECT_NE(r.output.find(" PLAN --data FILE"), std::string::npos);
}

TEST(BraidRunCli, ReportsBadInputAsErrors) {
  const std::string dir = tempDir("errors");
  const std::string plan = writePlan(dir);
  // Without the CUDA backend, or on a machine without a usable GPU, the run
  // is refused with one sentence naming what is missing (where a GPU works,
  // the GPU tests cover --device=cuda).
  Result r;
  if (absl::Status probe = probeDevice(Device::kCUDA); !probe.ok()) {
    r = run({plan, "--data", shakespeare(), "--device", "cuda"});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.output, absl::StrCat("braid-run: error: --device=cuda: ",
                                     probe.message(), "\n"));
    EXPECT_TRUE(r.output.find("without the CUDA backend") !=
                    std::string::npos ||
                r.output.find("cannot use a GPU: ") != std::string::npos)
        << r.output;
  }
  r = run({dir + "/missing.plan", "--data", shakespeare()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("cannot open the plan file"), std::string::npos);
  std::ofstream(dir + "/garbage.plan") << "this is not a plan";
  r = run({dir + "/garbage.plan", "--data", shakespeare()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("garbage.plan' is not a Braid plan"),
            std::string::npos)
      << r.output;
  std::ofstream(dir + "/tokens.bin") << "abc";
  r = run({plan, "--data", dir + "/tokens.bin"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("pass --data-format=text"), std::string::npos);
  r = run({plan, "--data", dir + "/tokens.bin", "--data-format", "uint16"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("has 3 bytes, which is not a multiple of 2"),
            std::string::npos)
      << r.output;
  r = run({plan, "--data", dir + "/tokens.bin", "--data-format", "text"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("holds 3 tokens, but one training window needs "
                          "seq_len + 1 = 9"),
            std::string::npos)
      << r.output;
  r = run({plan, "--data", shakespeare(), "--resume", dir + "/nothing"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  // A --save-dir that is a file fails before the first step.
  r = run({plan, "--data", shakespeare(), "--save-dir", dir + "/tokens.bin"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--save-dir '" + dir +
                          "/tokens.bin' is not a directory and cannot be "
                          "created"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step "), std::string::npos) << r.output;
}

std::vector<std::string> losses(const std::string &log) {
  std::vector<std::string> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    out.push_back(parseJson(line)->find("loss")->text);
  return out;
}

TEST(BraidRunCli, TrainsSavesAndResumesExactly) {
  const std::string dir = tempDir("train");
  const std::string plan = writePlan(dir);
  const std::string data = shakespeare();

  Result whole = run({plan, "--data", data, "--quiet", "--threads", "1",
                      "--log", dir + "/whole.jsonl"});
  ASSERT_EQ(whole.code, 0) << whole.output;
  EXPECT_EQ(whole.output, "");
  ASSERT_EQ(losses(dir + "/whole.jsonl").size(), 6u);

  Result first = run({plan, "--data", data, "--stop-after", "4", "--threads",
                      "1", "--peak-gflops", "20", "--log", dir + "/split.jsonl",
                      "--save-dir", dir + "/ckpt"});
  ASSERT_EQ(first.code, 0) << first.output;
  EXPECT_NE(first.output.find("memory per rank: parameters"),
            std::string::npos);
  EXPECT_NE(first.output.find("step    4/6 | loss "), std::string::npos)
      << first.output;
  EXPECT_EQ(first.output.find("step    5/6"), std::string::npos);
  EXPECT_NE(first.output.find("saved checkpoint " + dir + "/ckpt/step-000004"),
            std::string::npos)
      << first.output;

  Result second = run({plan, "--data", data, "--quiet", "--threads", "1",
                       "--log", dir + "/split.jsonl", "--resume", dir + "/ckpt",
                       "--save-dir", dir + "/ckpt"});
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_EQ(losses(dir + "/split.jsonl"), losses(dir + "/whole.jsonl"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-000006/model.safetensors"));

  Result done = run({plan, "--data", data, "--resume", dir + "/ckpt"});
  EXPECT_EQ(done.code, 0);
  EXPECT_NE(done.output.find("nothing to do: the checkpoint is at step 6 "
                             "of 6"),
            std::string::npos)
      << done.output;
}

TEST(BraidRunCli, SelfContainedBinaryCarriesItsPlan) {
  const std::string dir = tempDir("embedded");
  const std::string exe = dir + "/train_tiny";
  ASSERT_TRUE(writeBinaryWithPlan(
                  BRAID_RUN_EXE,
                  sealPlan(test::tinyModelPlan().SerializeAsString()), exe)
                  .ok());
  Result r = run({"--data", shakespeare(), "--steps", "2", "--quiet", "--log",
                  dir + "/log.jsonl"},
                 exe);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(losses(dir + "/log.jsonl").size(), 2u);
  r = run({"tiny.plan", "--data", shakespeare()}, exe);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("this binary carries its own plan and takes no "
                          "PLAN argument"),
            std::string::npos);
  r = run({"--help"}, exe);
  EXPECT_NE(r.output.find("train_tiny --data FILE [flags]"), std::string::npos)
      << r.output;

  // A corrupt embedded plan is reported as such, and never with advice
  // about .plan files, which the binary's user has none of.
  std::string sealed = sealPlan(test::tinyModelPlan().SerializeAsString());
  sealed[sealed.size() / 2] ^= 0x01;
  for (const std::string &bad : {std::string("not a plan"), sealed}) {
    ASSERT_TRUE(writeBinaryWithPlan(BRAID_RUN_EXE, bad, exe).ok());
    r = run({"--data", shakespeare()}, exe);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.output.find("braid-run: error: the plan embedded in this "
                            "executable "),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("rebuild this executable with braidc "
                            "--emit=binary"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find(".plan file"), std::string::npos) << r.output;
  }
}

struct Stopped {
  int code = -1; // exit status; -1 when killed by a signal
  std::string output;
};

// Starts a long run, waits for its first progress line, sends `sig` and
// collects what the run printed until it exits.
Stopped stopWith(int sig, const std::string &dir, bool save) {
  const std::string plan = writePlan(dir);
  int pipefd[2];
  if (::pipe(pipefd) != 0)
    return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::dup2(pipefd[1], STDERR_FILENO);
    ::close(pipefd[0]);
    const std::string data = shakespeare(), ckpt = dir + "/ckpt";
    std::vector<const char *> argv = {BRAID_RUN_EXE, plan.c_str(), "--data",
                                      data.c_str(), "--steps", "1000000",
                                      "--threads", "1", "--peak-gflops", "10"};
    if (save) {
      argv.push_back("--save-dir");
      argv.push_back(ckpt.c_str());
    }
    argv.push_back(nullptr);
    ::execv(BRAID_RUN_EXE, const_cast<char *const *>(argv.data()));
    ::_exit(127);
  }
  ::close(pipefd[1]);
  // Wait for the first progress line, so that training is under way.
  Stopped r;
  char c;
  while (r.output.find("step ") == std::string::npos &&
         ::read(pipefd[0], &c, 1) == 1)
    r.output += c;
  // Signalled even when no step was seen, so the child never outlives us.
  ::kill(pid, sig);
  while (::read(pipefd[0], &c, 1) == 1)
    r.output += c;
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(BraidRunCli, SigtermSavesAndExits143) {
  const std::string dir = tempDir("sigterm");
  Stopped r = stopWith(SIGTERM, dir, true);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.output;
  // The checkpoint of the last finished step exists.
  bool found = false;
  for (const auto &e : fs::directory_iterator(dir + "/ckpt"))
    found = found || fs::exists(e.path() / "manifest.json");
  EXPECT_TRUE(found);
  EXPECT_NE(r.output.find("braid-run: SIGTERM: saving at the end of this "
                          "step; send it again to abort"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("saved checkpoint"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("braid-run: stopped by SIGTERM after step "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("; resume with --resume " + dir + "/ckpt/step-"),
            std::string::npos)
      << r.output;
}

// Ctrl-C is acknowledged at once; without --save-dir the run says nothing
// will be saved and offers no --resume.
TEST(BraidRunCli, CtrlCIsAcknowledgedAndNeverOffersAMissingResume) {
  Stopped r = stopWith(SIGINT, tempDir("sigint"), false);
  EXPECT_EQ(r.code, 128 + SIGINT) << r.output;
  EXPECT_NE(r.output.find("braid-run: SIGINT: stopping at the end of this "
                          "step (nothing is saved without --save-dir); press "
                          "Ctrl-C again to abort"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(no --save-dir: progress was not saved)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("--resume"), std::string::npos) << r.output;
}

// A closed terminal (SIGHUP) stops a run as SIGTERM does: saved, 129.
TEST(BraidRunCli, SighupIsTreatedLikeSigterm) {
  const std::string dir = tempDir("sighup");
  Stopped r = stopWith(SIGHUP, dir, true);
  EXPECT_EQ(r.code, 128 + SIGHUP) << r.output;
  EXPECT_NE(r.output.find("braid-run: stopped by SIGHUP after step "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("saved checkpoint"), std::string::npos) << r.output;
}

// Outputs never destroy inputs: a log naming the data or the plan is
// refused before anything is written, and both stay intact.
TEST(BraidRunCli, RefusesAnOutputThatIsAnInput) {
  const std::string dir = tempDir("clobber");
  const std::string plan = writePlan(dir);
  const std::string data = dir + "/data.txt";
  fs::copy_file(shakespeare(), data);
  const std::string planBytes = readText(plan), dataBytes = readText(data);
  Result r = run({plan, "--data", data, "--steps", "1", "--log", data});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("braid-run: error: --log '" + data +
                          "' is the data file (--data) '" + data +
                          "': writing it would destroy it"),
            std::string::npos)
      << r.output;
  r = run({plan, "--data", data, "--steps", "1", "--log",
           dir + "/../cli-clobber/tiny.plan"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("is the plan file"), std::string::npos) << r.output;
  EXPECT_EQ(readText(plan), planBytes);
  EXPECT_EQ(readText(data), dataBytes);
  // A checkpoint being resumed is an input too.
  ASSERT_EQ(run({plan, "--data", data, "--steps", "1", "--quiet",
                 "--save-dir", dir + "/ckpt"})
                .code,
            0);
  const std::string model = dir + "/ckpt/step-000001/model.safetensors";
  r = run({plan, "--data", data, "--steps", "2", "--resume", dir + "/ckpt",
           "--log", model});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("is a file of the checkpoint being resumed"),
            std::string::npos)
      << r.output;
}

TEST(BraidRunCli, RefusesEmptyPathsAndBadResumeFlags) {
  const std::string data = shakespeare();
  expectUsageError({"p.plan", "--data", data, "--save-dir", ""},
                   "--save-dir needs a directory, not an empty string");
  expectUsageError({"p.plan", "--data", data, "--log="},
                   "--log needs a file, not an empty string");
  expectUsageError({"p.plan", "--data", ""},
                   "--data needs a data file, not an empty string");
  expectUsageError({"p.plan", "--data", data, "--resume", ""},
                   "--resume needs a checkpoint directory");
  expectUsageError({"p.plan", "--data", data, "--skip-nonfinite", "-1"},
                   "--skip-nonfinite needs a whole number of steps, 0 or "
                   "more, not \"-1\"");
  expectUsageError({"p.plan", "--data", data, "--resume", "d",
                    "--allow-change", "lr,seq_len"},
                   "--allow-change: \"seq_len\" is not a setting that may "
                   "change on resume; these may: name, steps, lr, min_lr, "
                   "warmup_steps, decay, beta1, beta2, eps, weight_decay, "
                   "grad_clip");
  expectUsageError({"p.plan", "--data", data, "--allow-change", "lr"},
                   "--allow-change only applies with --resume");
}

} // namespace
} // namespace braid
