// braid-pipeline-plans DIR: writes the hand-built plans test/mpi/pipeline.test
// trains, as plan files:
//
//   whole.plan      the tiny model on one rank, 2 micro-batches a step
//   pp2.plan        the same model cut in two pipeline ranks
//                   (TinyPipelinePlan.h), transfers on their own streams
//   pp2-1s.plan     the same on one stream per rank
//   pp2-dp2.plan    two replicas of the pipeline, 1 micro-batch each: the
//                   global batch of whole.plan on 4 ranks
//
// Every plan has the same name, model, training settings and parameter
// names, so they train alike and share checkpoints.
#include <cstdio>
#include <string>

#include "runtime/io/AtomicFile.h"
#include "runtime/plan/PlanFile.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyPipelinePlan.h"

namespace braid {
namespace {

int write(const std::string &path, const plan::Plan &plan) {
  absl::Status s =
      writeFileAtomically(path, sealPlan(plan.SerializeAsString()));
  if (!s.ok()) {
    std::fprintf(stderr, "braid-pipeline-plans: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

} // namespace
} // namespace braid

int main(int argc, char **argv) {
  using namespace braid;
  if (argc != 2) {
    std::fprintf(stderr, "usage: braid-pipeline-plans DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  test::TinyModelOptions model;
  model.numMicroBatches = 2;
  test::TinyPipelineOptions pp;
  pp.model = model;
  test::TinyPipelineOptions oneStream = pp;
  oneStream.oneStream = true;
  test::TinyPipelineOptions replicas = pp;
  replicas.model.numMicroBatches = 1;
  replicas.dataParallel = 2;
  return write(dir + "/whole.plan", test::tinyModelPlan(model)) |
         write(dir + "/pp2.plan", test::tinyPipelinePlan(pp)) |
         write(dir + "/pp2-1s.plan", test::tinyPipelinePlan(oneStream)) |
         write(dir + "/pp2-dp2.plan", test::tinyPipelinePlan(replicas));
}
