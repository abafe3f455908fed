//===- braidc.cpp - compile a model spec into a plan or a binary ----------===//
//
//   braidc SPEC [-o OUT] [--emit=plan|mlir|binary] [--plan-format=binary|text]
//               [--report-memory] [--fusion=all|none|LIST]
//               [--recompute=POLICY] [--memory-budget-gb=GIB]
//               [--offload=TARGETS]
//               [--runtime=BRAID_RUN] [--dump-schedule=FILE] [--simulate]
//               [--schedule-svg=FILE] [--sim-gflops=X] [--sim-link=L:B]
//               [--sim-profile=DIR] [--sim-cores=N]
//               [MLIR pass options]
//
// Runs the training pipeline (docs/passes.md) and writes the result. The
// spec is read once, so SPEC may be a pipe (`braidc <(cat spec.pbtxt)`).
// Every MLIR pass-manager option works, e.g. --mlir-print-ir-after-all;
// --help lists braidc's own options and the MLIR ones users reach for. With
// --report-memory and any fusion, the pipeline runs a second time without
// fusion and the report ends with the fused figures against the unfused
// ones (docs/memory.md). A plan braid-run would refuse (a kernel beyond its
// limits, an arena no process can map) is refused here, naming the spec
// fields that size it. With pipeline_parallel above 1 the pipeline's
// schedule can be dumped, simulated and drawn (docs/pipeline.md), and the
// plan holds one stage plan per pipeline rank.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include "compiler/emit/PlanEmitter.h"
#include "compiler/spec/FusionList.h"
#include "compiler/spec/RecomputePolicy.h"
#include "compiler/spec/SpecLoader.h"
#include "compiler/spec/SpecValidator.h"
#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedDialect.h"
#include "kernels/registry/Kernel.h"
#include "passes/CompileProgress.h"
#include "passes/MemoryComparison.h"
#include "passes/Passes.h"
#include "passes/fuse/FusionSet.h"
#include "runtime/comm/EmulatedLink.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/io/FileIdentity.h"
#include "runtime/plan/EmbeddedPlan.h"
#include "runtime/plan/PlanLoader.h"
#include "tools/braidc/PipelineOutputs.h"

namespace cl = llvm::cl;

static cl::OptionCategory braidcOptions("braidc options");
static cl::OptionCategory mlirOptions("MLIR options (docs/passes.md)");

static cl::opt<std::string> specPath(cl::Positional, cl::desc("<spec.pbtxt>"),
                                     cl::Required, cl::cat(braidcOptions));
static cl::opt<std::string>
    outputPath("o",
               cl::desc("Output file (default: <spec name>.plan for plans, "
                        "<spec name> for binaries, stdout for MLIR)"),
               cl::value_desc("path"), cl::cat(braidcOptions));
static cl::opt<std::string>
    emitOption("emit",
               cl::desc("What to write: plan (default), mlir (the planned "
                        "IR) or binary (a self-contained training "
                        "executable)"),
               cl::value_desc("plan|mlir|binary"), cl::init("plan"),
               cl::cat(braidcOptions));
static cl::opt<std::string>
    planFormat("plan-format",
               cl::desc("Plan encoding: binary (default; what braid-run "
                        "loads) or text (for reading)"),
               cl::value_desc("binary|text"), cl::init("binary"),
               cl::cat(braidcOptions));
static cl::opt<bool> reportMemory("report-memory",
                                  cl::desc("Print the memory report"),
                                  cl::init(false), cl::cat(braidcOptions));
static cl::opt<std::string>
    fusion("fusion",
           cl::desc("Fusions to apply: all, none, or names separated by "
                    "commas (docs/fusion.md); overrides the spec's "
                    "compile.fusion, whose default is none"),
           cl::value_desc("list"), cl::cat(braidcOptions));
static cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Recompute policy: none, auto, full, selective, uniform-N, "
             "block-N or op kinds separated by commas (docs/memory.md); "
             "overrides the spec's compile.recompute, whose default is none"),
    cl::value_desc("policy"), cl::cat(braidcOptions));
static cl::opt<double> memoryBudget(
    "memory-budget-gb",
    cl::desc("Device memory each rank may plan, in GiB: the plan is refused "
             "above it, and --recompute=auto chooses under it; overrides "
             "the spec's compile.memory_budget_gb (0: no budget)"),
    cl::value_desc("GiB"), cl::cat(braidcOptions));
static cl::opt<std::string> offload(
    "offload",
    cl::desc("What lives in host memory: none, optimizer (fp32 masters, "
             "Adam moments and AdamW), activations (every layer's saved "
             "activations between forward and backward), or activations: "
             "with layers N, ranges N-M and pipeline stages stage-S "
             "separated by commas, or an activations target and optimizer "
             "separated by ';' (docs/memory.md); overrides the spec's "
             "compile.offload, whose default is none"),
    cl::value_desc("targets"), cl::cat(braidcOptions));
static cl::opt<std::string>
    runtimePath("runtime",
                cl::desc("braid-run executable to embed the plan into "
                         "(default: the braid-run beside braidc)"),
                cl::value_desc("path"), cl::cat(braidcOptions));

static cl::OptionCategory pipelineOptions(
    "braidc pipeline options (pipeline_parallel above 1; docs/pipeline.md)");
static cl::opt<std::string> dumpSchedule(
    "dump-schedule",
    cl::desc("Write each rank's order of F, B, W and FB entries as JSON "
             "(- for stdout)"),
    cl::value_desc("file"), cl::cat(pipelineOptions));
static cl::opt<bool>
    simulateSchedule("simulate",
                     cl::desc("Print the simulated step time, bubble, "
                              "in-flight micro-batches and activation "
                              "memory per rank"),
                     cl::init(false), cl::cat(pipelineOptions));
static cl::opt<std::string>
    scheduleSvg("schedule-svg",
                cl::desc("Draw the simulated timeline, one row per rank, as "
                         "SVG"),
                cl::value_desc("file"), cl::cat(pipelineOptions));
static cl::opt<double>
    simGflops("sim-gflops",
              cl::desc("The simulator's compute rate per rank in GFLOP/s "
                       "(default 100)"),
              cl::init(100), cl::cat(pipelineOptions));
static cl::opt<std::string>
    simLink("sim-link",
            cl::desc("The simulator's link between stages: L us latency "
                     "and B GB/s (default 25:2)"),
            cl::value_desc("L:B"), cl::init("25:2"), cl::cat(pipelineOptions));
static cl::opt<std::string>
    simProfile("sim-profile",
               cl::desc("Take each stage's F, B and W costs from the traces "
                        "braid-run --trace wrote in DIR, and compare the "
                        "simulation with the measured run"),
               cl::value_desc("DIR"), cl::cat(pipelineOptions));
static cl::opt<int>
    simCores("sim-cores",
             cl::desc("The ranks share this many cores (0, the default: "
                      "each rank has its own)"),
             cl::init(0), cl::cat(pipelineOptions));

enum class Emit { kPlan, kMLIR, kBinary };

static int fail(const llvm::Twine &message) {
  llvm::errs() << "braidc: error: " << message << "\n";
  return 1;
}

// The MLIR options worth listing in --help; the rest stay hidden (and keep
// working, see --help-hidden).
static void showUsefulMlirOptions() {
  auto &all = cl::getRegisteredOptions();
  for (const char *name :
       {"mlir-print-ir-after-all", "mlir-print-ir-before-all",
        "mlir-print-ir-after-change", "mlir-timing", "mlir-pass-statistics",
        "mlir-print-debuginfo"}) {
    auto it = all.find(name);
    if (it != all.end())
      it->second->addCategory(mlirOptions);
  }
  cl::HideUnrelatedOptions({&braidcOptions, &pipelineOptions, &mlirOptions});
}

static std::string defaultOutput(const braid::spec::ModelSpec &spec,
                                 Emit emit) {
  std::string stem = spec.name().empty()
                         ? llvm::sys::path::stem(specPath).str()
                         : spec.name();
  switch (emit) {
  case Emit::kPlan:
    return stem + ".plan";
  case Emit::kBinary:
    return stem;
  case Emit::kMLIR:
    return "-";
  }
  return "-";
}

static std::string siblingRuntime(const char *argv0) {
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&siblingRuntime));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(path, "braid-run");
  return std::string(path);
}

// Plans the spec again without fusion and prints `fused`'s memory figures
// against that plan's. Only the pipeline runs: no report of its own, no
// emission, none of the pass-manager options of the command line.
static mlir::LogicalResult
compareWithUnfused(mlir::MLIRContext &context, mlir::ModuleOp fused,
                   std::shared_ptr<const braid::spec::ModelSpec> spec,
                   const std::string &recomputePolicy) {
  mlir::OwningOpRef<mlir::ModuleOp> unfused = mlir::ModuleOp::create(
      mlir::FileLineColLoc::get(&context, specPath, 1, 1));
  mlir::PassManager pm(&context);
  braid::TrainingPipelineOptions options;
  options.spec = specPath;
  options.loadedSpec = std::move(spec);
  options.fusion = "none";
  options.recompute = recomputePolicy;
  options.reportMemory = false;
  std::string error;
  if (mlir::failed(braid::buildTrainingPipeline(pm, options, error)) ||
      mlir::failed(pm.run(*unfused)))
    return mlir::failure();
  mlir::FailureOr<braid::MemoryFigures> withFusion =
      braid::readMemoryFigures(fused);
  mlir::FailureOr<braid::MemoryFigures> without =
      braid::readMemoryFigures(*unfused);
  if (mlir::failed(withFusion) || mlir::failed(without))
    return mlir::failure();
  braid::printMemoryComparison(llvm::errs(), *withFusion, *without);
  return mlir::success();
}

// Through a temporary file and a rename: a full disk or a write error
// leaves the previous file intact.
static int writeFile(const std::string &path, llvm::StringRef bytes) {
  absl::Status status = braid::writeFileAtomically(
      path, std::string_view(bytes.data(), bytes.size()));
  return status.ok() ? 0 : fail(std::string(status.message()));
}

// Loads the plan as braid-run will, so that a plan no machine could run is
// refused now, with the spec fields that size what was refused.
static int checkRunnable(const braid::plan::Plan &plan) {
  absl::StatusOr<braid::LoadedPlan> loaded =
      braid::loadPlan(plan.SerializeAsString(), braid::defaultKernelRegistry(),
                      braid::Device::kCPU);
  if (loaded.ok())
    return 0;
  std::string message(loaded.status().message());
  std::string hint;
  if (message.find("arena") != std::string::npos)
    hint = "; the arena holds the parameters, gradients and optimizer state "
           "(model.vocab_size, model.hidden_size, model.num_layers, "
           "model.ffn_hidden_size) and one micro-batch's activations "
           "(train.micro_batch_size x train.seq_len): reduce them";
  else if (message.find("GEMM") != std::string::npos ||
           message.find("2^31") != std::string::npos)
    hint = "; GEMM rows are train.micro_batch_size x train.seq_len and "
           "columns model.hidden_size, model.ffn_hidden_size or "
           "model.vocab_size: reduce them";
  return fail("braid-run could not run this plan: " + message + hint);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Past a file-size limit a write fails with EFBIG, which writeFile
  // reports; the default action of SIGXFSZ would kill braidc instead.
  std::signal(SIGXFSZ, SIG_IGN);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  showUsefulMlirOptions();
  cl::ParseCommandLineOptions(argc, argv,
                              "braidc: compile a Braid model spec\n");
  Emit emit;
  if (emitOption == "plan")
    emit = Emit::kPlan;
  else if (emitOption == "mlir")
    emit = Emit::kMLIR;
  else if (emitOption == "binary")
    emit = Emit::kBinary;
  else
    return fail("--emit must be plan, mlir or binary, not '" + emitOption +
                "'");
  if (planFormat != "binary" && planFormat != "text")
    return fail("--plan-format must be binary or text, not '" + planFormat +
                "'");

  // Spec errors are the user's most common mistake: report them plainly,
  // before any MLIR machinery runs. The spec is read here, once.
  absl::StatusOr<braid::spec::ModelSpec> loaded = braid::loadSpecFile(specPath);
  if (!loaded.ok()) {
    llvm::errs() << std::string(loaded.status().message()) << "\n";
    return 1;
  }
  if (memoryBudget.getNumOccurrences() > 0) {
    const double gib = memoryBudget;
    if (!std::isfinite(gib) || gib < 0 || gib > double(int64_t{1} << 32))
      return fail("--memory-budget-gb: give the device memory of one rank "
                  "in GiB, from 0 (no budget) to 2^32, not " +
                  absl::StrCat(gib));
    loaded->mutable_compile()->set_memory_budget_gb(gib);
  }
  // Set in the spec and checked by the spec's own rule, so that the flag
  // and the field accept the same targets with the same messages, and
  // braid-import reads either from the spec.
  if (offload.getNumOccurrences() > 0) {
    loaded->mutable_compile()->set_offload(offload);
    if (absl::Status s = braid::checkOffload(*loaded); !s.ok())
      return fail("--offload: " + std::string(s.message()));
  }
  auto spec =
      std::make_shared<const braid::spec::ModelSpec>(std::move(*loaded));
  std::string output =
      outputPath.empty() ? defaultOutput(*spec, emit) : outputPath;
  std::string runtime =
      runtimePath.empty() ? siblingRuntime(argv[0]) : runtimePath;
  if (output != "-") {
    std::vector<braid::NamedInput> inputs = {{"the spec", specPath}};
    if (emit == Emit::kBinary)
      inputs.push_back({"the runtime (--runtime)", runtime});
    if (absl::Status s = braid::refuseInputAsOutput("-o", output, inputs);
        !s.ok())
      return fail(std::string(s.message()));
  }
  braid::PipelineOutputs pipelineOutputs;
  pipelineOutputs.scheduleJson = dumpSchedule;
  pipelineOutputs.svg = scheduleSvg;
  pipelineOutputs.simulate = simulateSchedule;
  if (!(simGflops > 0 && simGflops < 1e12))
    return fail("--sim-gflops must be a positive rate in GFLOP/s");
  pipelineOutputs.rates.flopsPerSecond = simGflops * 1e9;
  pipelineOutputs.profileDir = simProfile;
  if (simCores < 0 || simCores > 1 << 20)
    return fail("--sim-cores must be a number of cores, 0 (each rank its "
                "own) or more");
  pipelineOutputs.cores = simCores;
  {
    absl::StatusOr<braid::LinkModel> link = braid::parseLinkModel(simLink);
    if (!link.ok())
      return fail("--sim-link: " + std::string(link.status().message()));
    pipelineOutputs.rates.linkLatency =
        std::chrono::duration<double>(link->latency).count();
    pipelineOutputs.rates.linkBytesPerSecond = link->bytesPerSecond;
  }
  if ((!simProfile.empty() || simCores != 0) && !simulateSchedule &&
      scheduleSvg.empty())
    return fail("--sim-profile and --sim-cores shape the simulation: give "
                "them with --simulate or --schedule-svg");
  const bool pipelined = spec->parallel().pipeline_parallel() > 1;
  if (pipelineOutputs.any() && !pipelined)
    return fail("--dump-schedule, --simulate and --schedule-svg need a "
                "pipeline: set parallel.pipeline_parallel above 1");
  auto start = std::chrono::steady_clock::now();

  mlir::DialectRegistry registry;
  registry.insert<braid::BraidDialect, braid::sched::SchedDialect,
                  mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(
      mlir::FileLineColLoc::get(&context, specPath, 1, 1));

  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return fail("invalid pass manager options");
  braid::addCompileInstrumentation(pm, "braidc");
  auto fusionOutcome = std::make_shared<braid::FusionOutcome>();
  braid::watchFusions(pm, fusionOutcome);
  braid::TrainingPipelineOptions options;
  options.spec = specPath;
  options.loadedSpec = spec;
  options.reportMemory = reportMemory;
  // The pipeline's outputs come from its schedule: braidc stops there and
  // writes them instead of a plan.
  options.stopAfterSchedule = pipelined && pipelineOutputs.any();
  // The flag wins over the spec; neither means no fusion.
  const bool fusionFlag = fusion.getNumOccurrences() > 0;
  options.fusion = braid::effectiveFusionList(
      fusionFlag ? std::string(fusion) : std::string("spec"), *spec);
  if (recompute.getNumOccurrences() > 0) {
    if (absl::StatusOr<std::vector<braid::RecomputePolicy>> policy =
            braid::parseRecomputeStages(recompute);
        !policy.ok())
      return fail("--recompute: " + std::string(policy.status().message()));
    options.recompute = recompute;
  }
  std::string pipelineError;
  if (mlir::failed(braid::buildTrainingPipeline(pm, options, pipelineError)))
    return fail((fusionFlag ? "--fusion: " : "compile.fusion: ") +
                pipelineError);
  if (mlir::failed(pm.run(*module)))
    return fail("compilation failed");
  if (options.stopAfterSchedule) {
    if (absl::Status s = braid::writePipelineOutputs(*module, pipelineOutputs);
        !s.ok())
      return fail(std::string(s.message()));
    return 0;
  }
  // A fusion asked for by name that found nothing to fuse is most likely a
  // mistake about the model; "all" asks for whatever applies.
  if (!braid::namesEveryFusion(options.fusion))
    for (const braid::Fusion *f : fusionOutcome->unchanged)
      llvm::errs() << "braidc: warning: fusion '" << f->name
                   << "' matched nothing in this model (docs/fusion.md says "
                      "which ops it fuses)\n";
  // Only a plan that fuses something has an unfused plan to compare with.
  mlir::FailureOr<llvm::SmallVector<const braid::Fusion *>> fusions =
      braid::parseFusionList(options.fusion, pipelineError);
  bool fuses = mlir::succeeded(fusions) && !fusions->empty();
  if (reportMemory && fuses &&
      mlir::failed(compareWithUnfused(context, *module, spec,
                                      options.recompute)))
    llvm::errs() << "braidc: warning: the plan without fusion failed, so the "
                    "memory report has no comparison with it\n";

  if (emit == Emit::kMLIR) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    if (output == "-") {
      llvm::outs() << text;
      return 0;
    }
    return writeFile(output, text);
  }

  mlir::FailureOr<braid::plan::Plan> plan = braid::emitPlan(*module);
  if (mlir::failed(plan))
    return fail("plan emission failed");
  if (int rc = checkRunnable(*plan))
    return rc;
  const std::string bytes = braid::planFileBytes(
      *plan, planFormat == "text" && emit == Emit::kPlan);

  if (emit == Emit::kBinary) {
    if (!llvm::sys::fs::exists(runtime))
      return fail("no braid-run executable at '" + runtime +
                  "'; build it or pass --runtime=PATH");
    absl::Status status = braid::writeBinaryWithPlan(runtime, bytes, output);
    if (!status.ok())
      return fail(std::string(status.message()));
  } else if (output == "-") {
    llvm::outs() << bytes;
  } else if (int rc = writeFile(output, bytes)) {
    return rc;
  }

  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  // A pipeline plan's figures are its stage plans': the sums, and the
  // largest arena a rank maps.
  size_t launches = 0, tensors = 0;
  uint64_t arena = 0;
  auto count = [&](const braid::plan::Plan &p) {
    for (const auto &program : p.programs())
      launches += program.instructions_size();
    tensors += p.tensors_size();
    arena = std::max<uint64_t>(arena, p.memory().arena_bytes());
  };
  count(*plan);
  for (const auto &stage : plan->stage_plans())
    count(stage);
  const std::string ranks =
      plan->stage_plans_size() > 0
          ? " over " + std::to_string(plan->stage_plans_size()) +
                " pipeline ranks, arena up to"
          : ", arena";
  llvm::errs() << llvm::format(
      "braidc: wrote %s (%zu tensors, %zu instructions%s %.3f GiB) in "
      "%.2f s\n",
      output.c_str(), tensors, launches, ranks.c_str(),
      static_cast<double>(arena) / (1ull << 30), seconds);
  return 0;
}
