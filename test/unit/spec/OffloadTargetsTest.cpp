// compile.offload: the parser of its targets (every form and every
// refusal), whether the layers and stages it names exist, and the spec
// rule that reports both at the field's line:column.
#include "compiler/spec/OffloadTargets.h"
#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

constexpr const char *kAccepted =
    "write none, or optimizer, activations (every layer's) or activations: "
    "followed by items separated by commas, each a layer N, a range of "
    "layers N-M (N <= M) or a pipeline stage stage-S, and both separated by "
    "a semicolon, e.g. activations:0-3,stage-1; optimizer";

// The message parseOffloadTargets refuses `text` with; "(parsed)" when it
// parses, so that a missing error shows up as a readable mismatch.
std::string refusalOf(std::string_view text) {
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(text);
  if (targets.ok())
    return "(parsed)";
  EXPECT_EQ(targets.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(targets.status().message());
}

std::vector<int64_t> layersOf(std::string_view text) {
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(text);
  EXPECT_TRUE(targets.ok()) << text << ": " << targets.status();
  return targets.ok() ? targets->layers : std::vector<int64_t>{};
}

std::vector<int64_t> stagesOf(std::string_view text) {
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(text);
  EXPECT_TRUE(targets.ok()) << text << ": " << targets.status();
  return targets.ok() ? targets->stages : std::vector<int64_t>{};
}

using Numbers = std::vector<int64_t>;

TEST(OffloadTargets, NoneIsEmpty) {
  for (const char *text : {"", "none", "  none  ", " \t"}) {
    absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(text);
    ASSERT_TRUE(targets.ok()) << "'" << text << "'";
    EXPECT_TRUE(targets->empty()) << "'" << text << "'";
  }
}

TEST(OffloadTargets, ActivationsAloneIsEveryLayer) {
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(" activations ");
  ASSERT_TRUE(targets.ok());
  EXPECT_TRUE(targets->allLayers);
  EXPECT_TRUE(targets->layers.empty());
  EXPECT_TRUE(targets->stages.empty());
  EXPECT_FALSE(targets->empty());
}

// Layers from N and N-M items, stages from stage-S items, each sorted and
// unique whatever the order and the overlaps of the items.
TEST(OffloadTargets, ParsesLayersRangesAndStages) {
  EXPECT_EQ(layersOf("activations:3"), Numbers({3}));
  EXPECT_EQ(layersOf("activations:0-3"), Numbers({0, 1, 2, 3}));
  EXPECT_EQ(layersOf("activations:5-5"), Numbers({5}));
  EXPECT_EQ(layersOf("activations:0007"), Numbers({7}));
  EXPECT_EQ(layersOf("activations:9,2-4,0,3-5,4"), Numbers({0, 2, 3, 4, 5, 9}));
  EXPECT_EQ(layersOf("activations:stage-2"), Numbers({}));
  EXPECT_EQ(stagesOf("activations:stage-2"), Numbers({2}));
  EXPECT_EQ(stagesOf("activations:stage-3,1,stage-0,stage-3"), Numbers({0, 3}));
  // Spaces around the kind, the colon, the items and a range's dash.
  absl::StatusOr<OffloadTargets> spaced =
      parseOffloadTargets("  activations : 3 , 0 - 1,\tstage-1 ,stage-0 ");
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_FALSE(spaced->allLayers);
  EXPECT_EQ(spaced->layers, Numbers({0, 1, 3}));
  EXPECT_EQ(spaced->stages, Numbers({0, 1}));
}

// Numbers up to kMaxOffloadIndex; a range expands to its layers once,
// however many items repeat it.
TEST(OffloadTargets, LargestNumbers) {
  EXPECT_EQ(layersOf("activations:1048575"), Numbers({kMaxOffloadIndex}));
  std::string many = "activations:";
  for (int i = 0; i < 10000; ++i)
    many += "0-1048575,";
  many += "stage-1048575";
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(many);
  ASSERT_TRUE(targets.ok()) << targets.status();
  EXPECT_EQ(targets->layers.size(), size_t{1} << 20);
  EXPECT_EQ(targets->layers.back(), kMaxOffloadIndex);
  EXPECT_EQ(targets->stages, Numbers({kMaxOffloadIndex}));
}

// Kinds other than activations name the kinds there are.
TEST(OffloadTargets, RefusesUnknownKinds) {
  const std::string unknown =
      std::string("is not an offload target kind: the known kinds are none, "
                  "activations (what each transformer layer saves for its "
                  "backward) and optimizer (fp32 masters, Adam moments and "
                  "AdamW); ") +
      kAccepted;
  EXPECT_EQ(refusalOf("weights"), "'weights' " + unknown);
  EXPECT_EQ(refusalOf("activations; weights"), "'weights' " + unknown);
  // The optimizer is offloaded whole.
  EXPECT_EQ(refusalOf(" optimizer:0-3"),
            std::string("'optimizer:0-3' takes no list: the optimizer of "
                        "every parameter the rank holds goes to the host; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("activation"), "'activation' " + unknown);
  EXPECT_EQ(refusalOf("activations 0"), "'activations 0' " + unknown);
  EXPECT_EQ(refusalOf("none:1"),
            std::string("'none:1': none offloads nothing and takes no list "
                        "nor other target; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("none; optimizer"),
            std::string("'none; optimizer': none offloads nothing and takes "
                        "no list nor other target; ") +
                kAccepted);
}

// Optimizer offload alone or beside activations, in either order.
TEST(OffloadTargets, ParsesTheOptimizer) {
  absl::StatusOr<OffloadTargets> alone = parseOffloadTargets(" optimizer ");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->optimizer);
  EXPECT_TRUE(alone->noActivations());
  EXPECT_FALSE(alone->empty());
  for (const char *text :
       {"activations:1-2,stage-0; optimizer", "optimizer;activations:2,1,stage-0"}) {
    absl::StatusOr<OffloadTargets> both = parseOffloadTargets(text);
    ASSERT_TRUE(both.ok()) << text << ": " << both.status();
    EXPECT_TRUE(both->optimizer) << text;
    EXPECT_EQ(both->layers, Numbers({1, 2})) << text;
    EXPECT_EQ(both->stages, Numbers({0})) << text;
  }
  absl::StatusOr<OffloadTargets> every =
      parseOffloadTargets("activations ; optimizer");
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_TRUE(every->allLayers && every->optimizer);
  EXPECT_FALSE(parseOffloadTargets("activations")->optimizer);
}

TEST(OffloadTargets, RefusesATargetTwiceOrAnEmptyOne) {
  EXPECT_EQ(refusalOf("optimizer; optimizer"),
            std::string("'optimizer; optimizer' names optimizer twice; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("activations:0; activations:1"),
            std::string("'activations:0; activations:1' names activations "
                        "twice: list every layer and stage after one "
                        "activations:; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("optimizer;"),
            std::string("'optimizer;' has an empty target between "
                        "semicolons; ") +
                kAccepted);
}

TEST(OffloadTargets, RefusesEmptyItems) {
  EXPECT_EQ(refusalOf("activations:"),
            std::string("'activations:' names nothing after the colon; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("activations: "),
            std::string("'activations:' names nothing after the colon; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("activations:1,,2"),
            std::string("'activations:1,,2' has an empty item; ") + kAccepted);
  EXPECT_EQ(refusalOf("activations:0, "),
            std::string("'activations:0,' has an empty item; ") + kAccepted);
}

TEST(OffloadTargets, RefusesBackwardRanges) {
  EXPECT_EQ(refusalOf("activations:3-1"),
            "'3-1' is not a range: its first layer is after its last; write "
            "1-3");
}

TEST(OffloadTargets, RefusesWhatIsNotANumber) {
  for (const char *item : {"x", "1.5", "+1", "1-", "-", "1-2-3", "stage-",
                           "stage-a", "stage", "stage 1", "stage-1-2", "0x10"})
    EXPECT_EQ(refusalOf(std::string("activations:") + item),
              std::string("'") + item +
                  "' is not a layer N, a range of layers N-M or a stage "
                  "stage-S; " +
                  kAccepted)
        << item;
}

// Messages are one line of bounded length, whatever the text.
TEST(OffloadTargets, QuotesItemsPrintably) {
  EXPECT_EQ(refusalOf("activations:1\n2"),
            std::string("'1\\x0a2' is not a layer N, a range of layers N-M or "
                        "a stage stage-S; ") +
                kAccepted);
  EXPECT_EQ(refusalOf("activations:" + std::string(100, '9')),
            "'" + std::string(40, '9') + "...' names " + std::string(40, '9') +
                "..., beyond the largest layer or stage number an item may "
                "name, 1048575");
}

TEST(OffloadTargets, RefusesNegativeNumbers) {
  for (const char *item : {"-2", "-1-3", "3--1", "stage--1"})
    EXPECT_EQ(refusalOf(std::string("activations:") + item),
              std::string("'") + item +
                  "' is negative: layers and stages count from 0")
        << item;
}

TEST(OffloadTargets, RefusesNumbersBeyondTheLargest) {
  EXPECT_EQ(refusalOf("activations:1048576"),
            "'1048576' names 1048576, beyond the largest layer or stage "
            "number an item may name, 1048575");
  EXPECT_EQ(refusalOf("activations:0-99999999999999999999999"),
            "'0-99999999999999999999999' names 99999999999999999999999, "
            "beyond the largest layer or stage number an item may name, "
            "1048575");
  EXPECT_EQ(refusalOf("activations:stage-2000000"),
            "'stage-2000000' names 2000000, beyond the largest layer or "
            "stage number an item may name, 1048575");
}

absl::Status existence(std::string_view text, int64_t layers, int64_t stages,
                       int64_t ranks) {
  absl::StatusOr<OffloadTargets> targets = parseOffloadTargets(text);
  EXPECT_TRUE(targets.ok()) << text << ": " << targets.status();
  return checkOffloadTargetsExist(*targets, layers, stages, ranks);
}

// What does not exist, as runs, and what does.
TEST(OffloadTargets, NamesWhatDoesNotExist) {
  EXPECT_TRUE(existence("activations", 2, 1, 1).ok());
  EXPECT_TRUE(existence("activations:0-1,stage-0", 2, 1, 1).ok());
  EXPECT_EQ(existence("activations:7", 2, 1, 1).message(),
            "layer 7 does not exist: the model has 2 layers (0-1)");
  EXPECT_EQ(existence("activations:1", 1, 1, 1).message(),
            "layer 1 does not exist: the model has 1 layer (0)");
  EXPECT_EQ(existence("activations:0-7,9,11-12", 2, 1, 1).message(),
            "layers 2-7, 9 and 11-12 do not exist: the model has 2 layers "
            "(0-1)");
  EXPECT_EQ(existence("activations:stage-1", 2, 1, 1).message(),
            "stage 1 does not exist: the layout has 1 pipeline stage (0)");
  EXPECT_EQ(existence("activations:stage-3", 8, 2, 2).message(),
            "stage 3 does not exist: the layout has 2 pipeline stages (0-1)");
  EXPECT_EQ(existence("activations:stage-4,stage-5", 8, 4, 2).message(),
            "stages 4-5 do not exist: the layout has 4 pipeline stages "
            "(0-3), 2 on each of 2 pipeline ranks");
  EXPECT_EQ(existence("activations:9,stage-2", 8, 2, 2).message(),
            "layer 9 does not exist: the model has 8 layers (0-7); stage 2 "
            "does not exist: the layout has 2 pipeline stages (0-1)");
  EXPECT_EQ(existence("activations:9", 8, 2, 2).code(),
            absl::StatusCode::kInvalidArgument);
}

// kLlama (2 layers) with `compile` written on line 20 (or `parallel` on
// line 20 and `compile` on line 21).
std::string withOffload(std::string_view targets,
                        std::string_view parallel = "") {
  std::string spec(kLlama);
  if (!parallel.empty())
    spec += "parallel { " + std::string(parallel) + " }\n";
  return spec + "compile { offload: \"" + std::string(targets) + "\" }\n";
}

// kLlama with 4 layers and 8 micro-batches, enough for 2 ranks of 2
// chunks each.
std::string withOffload4Layers(std::string_view targets,
                               std::string_view parallel) {
  return edit(
      edit(withOffload(targets, parallel), "num_layers: 2", "num_layers: 4"),
      "micro_batch_size: 2\n", "micro_batch_size: 1\n  global_batch_size: 8\n");
}

TEST(CompileRules, OffloadSyntax) {
  for (const char *ok :
       {"", "none", "activations", "activations:0-1", " activations: 1, 0 ",
        "activations:stage-0", "activations:0,stage-0", "optimizer",
        "activations:0; optimizer"})
    EXPECT_EQ(errorOf(withOffload(ok)), "(loaded)") << ok;
  EXPECT_EQ(errorOf(withOffload("weights")),
            std::string("t.pbtxt:20:11: compile.offload: 'weights' is not an "
                        "offload target kind: the known kinds are none, "
                        "activations (what each transformer layer saves for "
                        "its backward) and optimizer (fp32 masters, Adam "
                        "moments and AdamW); ") +
                kAccepted);
  EXPECT_EQ(errorOf(std::string(kLlama) +
                    "compile {\n  offload: \"activations:1,,0\"\n}\n"),
            std::string("t.pbtxt:21:3: compile.offload: 'activations:1,,0' "
                        "has an empty item; ") +
                kAccepted);
  EXPECT_EQ(errorOf(withOffload("activations:1-0")),
            "t.pbtxt:20:11: compile.offload: '1-0' is not a range: its first "
            "layer is after its last; write 0-1");
  EXPECT_EQ(errorOf(withOffload("activations:-1")),
            "t.pbtxt:20:11: compile.offload: '-1' is negative: layers and "
            "stages count from 0");
}

// Every layer and stage named exists, in the model and in the stages the
// pipeline layout numbers: one per rank, or one per rank and chunk.
TEST(CompileRules, OffloadTargetsExist) {
  EXPECT_EQ(errorOf(withOffload("activations:7")),
            "t.pbtxt:20:11: compile.offload: layer 7 does not exist: the "
            "model has 2 layers (0-1)");
  EXPECT_EQ(errorOf(withOffload("activations:1-3")),
            "t.pbtxt:20:11: compile.offload: layers 2-3 do not exist: the "
            "model has 2 layers (0-1)");
  EXPECT_EQ(errorOf(withOffload("activations:stage-1")),
            "t.pbtxt:20:11: compile.offload: stage 1 does not exist: the "
            "layout has 1 pipeline stage (0)");
  EXPECT_EQ(errorOf(withOffload("activations:stage-1", "pipeline_parallel: 2")),
            "(loaded)");
  EXPECT_EQ(errorOf(withOffload("activations:stage-3", "pipeline_parallel: 2")),
            "t.pbtxt:21:11: compile.offload: stage 3 does not exist: the "
            "layout has 2 pipeline stages (0-1)");
  // Interleaved with virtual stages, and DualPipeV's V: 2 chunks per rank.
  for (const char *parallel :
       {"pipeline_parallel: 2 virtual_stages: 2",
        "pipeline_parallel: 2 pipeline_schedule: DUALPIPE_V"}) {
    EXPECT_EQ(errorOf(withOffload4Layers("activations:3,stage-3", parallel)),
              "(loaded)")
        << parallel;
    EXPECT_EQ(errorOf(withOffload4Layers("activations:stage-4", parallel)),
              "t.pbtxt:22:11: compile.offload: stage 4 does not exist: the "
              "layout has 4 pipeline stages (0-3), 2 on each of 2 pipeline "
              "ranks")
        << parallel;
  }
}

// A spec broken elsewhere is not checked for the targets' existence: the
// layer count or the layout it would be checked against may be the error.
TEST(CompileRules, OffloadExistenceWaitsForTheModel) {
  EXPECT_EQ(errorOf(edit(withOffload("activations:7"), "num_heads: 4",
                         "num_heads: 0")),
            "t.pbtxt:6:3: model.num_heads: 0 is not positive; set the number "
            "of attention heads, e.g. num_heads: 32");
}

} // namespace
} // namespace braid::test
