// RUN: braid-opt --braid-import=spec=%S/Inputs/pipeline-14.pbtxt --braid-partition %s | FileCheck %s

// 14 layers over 4 stages take 4 slots each; the 2 empty ones go to the
// dearest stages: the last (its layers and the LM head), then the latest
// of the three even ones. Real layers keep their model indices.
// CHECK: braid.partition = [{embedding, first = 0 : i64, layers = 4 : i64, padding = 0 : i64}, {first = 4 : i64, layers = 4 : i64, padding = 0 : i64}, {first = 8 : i64, layers = 3 : i64, padding = 1 : i64}, {first = 11 : i64, layers = 3 : i64, loss, padding = 1 : i64}]
// CHECK-SAME: braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64}
module {
}
