#!/usr/bin/env bash
# Two plans of one run at data_parallel 1, for the GPU's NCCL end-to-end test
# (test/gpu/e2e/NcclTrainingTest.cpp) and its CPU twin
# (test/e2e/collectives-at-dp1.test):
#
#   reference.plan    SPEC with one micro-batch per step (global batch =
#                     micro-batch), as braidc compiles it: no collectives
#   collectives.plan  the same run with collectives in its step program
#   work/collectives.mlir  the IR collectives.plan was made from
#
# collectives.plan is SPEC with zero_stage 1 where braidc puts collectives
# in it at one rank (ZeRO's reduce-scatters and all-gathers). Otherwise
# (braidc refuses zero_stage 1, or leaves it without collectives at one
# rank) it is made by hand from the lowering of SPEC at data_parallel 2,
# which all-reduces every gradient and the loss sum over DP: the mesh is set
# back to dp 1 and the loss gradient's scale 1 / (M x dp) = 1/2 to
# 1 / M = 1, so that it computes what reference.plan does, with one
# all-reduce per gradient on the communication stream.
#
#   collective_plans.sh BRAIDC BRAID_OPT SPEC OUTDIR
#
# Never fails the build that runs it: when collectives.plan cannot be made,
# OUTDIR/collectives.why says why, and the tests that need the plan fail with
# that sentence.
set -uo pipefail
if [ $# -ne 4 ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
braidc="$1" braid_opt="$2" spec="$3" out="$4"
mkdir -p "$out"
rm -f "$out/reference.plan" "$out/collectives.plan" "$out/collectives.why"
work="$out/work"
rm -rf "$work"
mkdir -p "$work"

why() {
  echo "collective_plans.sh: $*" | tee "$out/collectives.why" >&2
  exit 0
}

mb="$(sed -n 's/^ *micro_batch_size: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
[ -n "$mb" ] || why "$spec has no micro_batch_size"
grep -q 'data_parallel: 1' "$spec" || why "$spec is not at data_parallel 1"
sed -e "s/global_batch_size: *[0-9]*/global_batch_size: $mb/" "$spec" > "$work/dp1.pbtxt"
sed -e 's/data_parallel: 1/data_parallel: 1 zero_stage: 1/' "$work/dp1.pbtxt" > "$work/zero1.pbtxt"
sed -e "s/data_parallel: 1/data_parallel: 2/" \
  -e "s/global_batch_size: *[0-9]*/global_batch_size: $((2 * mb))/" "$spec" > "$work/dp2.pbtxt"

"$braidc" "$work/dp1.pbtxt" -o "$out/reference.plan" 2> "$work/reference.log" ||
  why "braidc cannot compile the reference: $(tail -n 2 "$work/reference.log")"

# ZeRO at data_parallel 1, once the compiler builds it.
if "$braidc" "$work/zero1.pbtxt" --emit=mlir -o "$work/zero1.mlir" 2> "$work/zero1.log" &&
    grep -q 'sched.collective' "$work/zero1.mlir"; then
  "$braidc" "$work/zero1.pbtxt" -o "$out/collectives.plan" 2>> "$work/zero1.log" ||
    why "braidc compiles zero_stage 1 to MLIR but not to a plan: $(tail -n 2 "$work/zero1.log")"
  cp "$work/zero1.mlir" "$work/collectives.mlir"
  echo "collective_plans.sh: collectives.plan is the spec at zero_stage 1" > "$work/how.txt"
  exit 0
fi

# By hand, from the data-parallel lowering.
"$braid_opt" /dev/null --braid-import=spec="$work/dp2.pbtxt" --braid-autodiff \
  --braid-lower-to-sched --braid-overlap > "$work/dp2.mlir" 2> "$work/dp2.log" ||
  why "braid-opt cannot lower the spec at data_parallel 2: $(tail -n 2 "$work/dp2.log")"
grep -q 'sched.collective all_reduce_sum dp' "$work/dp2.mlir" ||
  why "the lowering at data_parallel 2 has no 'sched.collective all_reduce_sum dp'"
grep -q 'braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 1, dp = 2>' "$work/dp2.mlir" ||
  why "the lowering at data_parallel 2 has no '#braid.mesh<tp = 1, cp = 1, pp = 1, dp = 2>'"
[ "$(grep -c '"cross_entropy_grad_input".*scale = 5.000000e-01' "$work/dp2.mlir")" = 1 ] ||
  why "the lowering at data_parallel 2 has not one cross_entropy_grad_input of scale 5.000000e-01 (1 / (M x dp))"
sed -e 's/#braid.mesh<tp = 1, cp = 1, pp = 1, dp = 2>/#braid.mesh<tp = 1, cp = 1, pp = 1, dp = 1>/' \
  -e '/"cross_entropy_grad_input"/s/scale = 5.000000e-01/scale = 1.000000e+00/' \
  "$work/dp2.mlir" > "$work/collectives.mlir"
"$braid_opt" "$work/collectives.mlir" --braid-plan-memory \
  --braid-emit-plan=output="$out/collectives.plan" -o /dev/null 2> "$work/emit.log" ||
  why "braid-opt cannot plan the edited lowering: $(tail -n 2 "$work/emit.log")"
echo "collective_plans.sh: collectives.plan is the data_parallel 2 lowering set to dp 1 by hand" > "$work/how.txt"
