//===- SchedBase.td - the sched dialect -------------------------*- tablegen -*-===//
//
// `sched` says *when and where*: per-rank programs of kernel launches on
// streams, joined by events, over buffers that are slices of one static
// arena. It is the last IR before the plan; every op maps to one plan entry.
//
//===----------------------------------------------------------------------===//

#ifndef SCHED_BASE_TD
#define SCHED_BASE_TD

include "mlir/IR/OpBase.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::braid::sched";
  let summary = "Ordered kernel launches on streams over arena buffers";
  let description = [{
    Buffers are `memref` values with static shapes. Persistent buffers
    (parameters, gradients, optimizer state, weight copies, inputs,
    scalars) are
    module-level `sched.global` symbols; transient ones are `sched.alloc`
    inside a program. After `braid-plan-memory` every global and alloc
    carries its arena `offset`.

    What a global holds and what a program is run as are enums
    (SchedAttrs.td): `sched.global @w parameter ...`,
    `sched.program @step step { ... }`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    // On a rank's module: the streams whose launches run on the host CPU
    // over host buffers (optimizer offload's AdamW), an array of i32.
    static constexpr ::llvm::StringLiteral kHostStreamsAttr =
        "sched.host_streams";
    // Whether `stream` is one of the host streams of `op`'s module.
    static bool isHostStream(::mlir::Operation *op, uint32_t stream);
  }];
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

def Sched_Buffer : StaticShapeMemRefOf<[F32, BF16, I32]>;

#endif // SCHED_BASE_TD
