// The kernel interface between the runtime and device kernels.
//
// A plan names kernels by string ("linear", "rms_norm_grad_input", ...;
// docs/kernels.md is the catalogue). At load time the runtime resolves every
// name through the KernelRegistry and calls the kernel's `check` with the
// shapes, dtypes and parameters of that launch, so that a bad plan is refused
// before anything runs. At run time it calls `run` with bound tensors; `run`
// cannot fail, because everything it could trip over was checked.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace braid {

class ThreadPool;

enum class DType { kF32, kBF16, kI32 };

std::string_view dtypeName(DType dtype);
int64_t dtypeSize(DType dtype);

// Shape and dtype of one kernel operand, as the plan states it.
struct TensorDesc {
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;

  int64_t numel() const;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  // The last dimension (1 for a scalar) and the product of the others.
  int64_t lastDim() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i)
      r *= shape[i];
    return r;
  }
};

// An operand bound to memory in the rank's arena.
struct TensorView {
  void *data = nullptr;
  const TensorDesc *desc = nullptr;

  float *f32() const { return static_cast<float *>(data); }
  // bf16 values as their 16-bit patterns (the upper half of an fp32).
  uint16_t *bf16() const { return static_cast<uint16_t *>(data); }
  int32_t *i32() const { return static_cast<int32_t *>(data); }
  int64_t numel() const { return desc->numel(); }
};

// Named kernel parameters (the `params` of a sched.launch).
class KernelParams {
public:
  void setInt(std::string name, int64_t v);
  void setFloat(std::string name, double v);

  bool has(std::string_view name) const;
  // Missing parameters are an error that `check` reports; `run` may use the
  // plain accessors, which return the fallback when absent.
  absl::StatusOr<int64_t> getInt(std::string_view name) const;
  absl::StatusOr<double> getFloat(std::string_view name) const;
  int64_t intOr(std::string_view name, int64_t fallback) const;
  double floatOr(std::string_view name, double fallback) const;

  std::string toString() const;

private:
  struct Entry {
    std::string name;
    bool isInt;
    int64_t i;
    double f;
  };
  const Entry *find(std::string_view name) const;
  std::vector<Entry> entries_;
};

// What a launch looks like before any memory exists: used by `check`.
struct KernelSignature {
  absl::Span<const TensorDesc> ins;
  absl::Span<const TensorDesc> outs;
  const KernelParams *params = nullptr;
};

// The values that change from one program run to the next. CUDA kernels
// read them from device memory (GpuContext::stepValues), because a kernel
// captured in a CUDA graph keeps the launch arguments of its capture.
struct StepValues {
  int64_t step = 1;        // 1-based optimizer step being computed
  double lr = 0;           // learning rate of this step (optimizer kernels)
  uint64_t seed = 0;       // the spec's seed (dropout masks)
  // 1-based number of the AdamW update this step makes: `step` less the
  // earlier steps that were skipped as non-finite (AdamW's bias correction).
  int64_t update = 1;
  // This rank's coordinate along the tensor-parallel axis and the axis's
  // size: a kernel whose operands are one TP rank's part of a whole tensor
  // (a vocabulary shard, a slice of the heads) offsets its ids and random
  // draws by them (docs/parallel.md, "Tensor parallel").
  int64_t tpRank = 0;
  int64_t tpSize = 1;
  // The same along the context-parallel axis: a kernel whose operands hold
  // this rank's load-balanced part of the sequence (docs/parallel.md,
  // "Context parallel") maps its positions to the whole sequence's.
  int64_t cpRank = 0;
  int64_t cpSize = 1;
  // This rank's place in its expert-parallel group: a kernel that maps the
  // group's token counts to this rank's experts reads it (docs/moe.md).
  int64_t epRank = 0;
};

// What CUDA kernels need from the runtime. Opaque pointers keep this header
// free of CUDA: kernels/cuda casts them back.
struct GpuContext {
  void *stream = nullptr;        // cudaStream_t the launch is enqueued on
  void *blasLt = nullptr;        // cublasLtHandle_t
  void *workspace = nullptr;     // device scratch for cuBLASLt
  size_t workspaceBytes = 0;
  const void *api = nullptr;     // kernels/cuda/CublasLtApi (loaded with dlopen)
  const StepValues *stepValues = nullptr;  // device pointer
};

// What kernels count during one run of a program, for the run's log: the
// decisions of adaptive recompute's moe_keep_rows (docs/moe.md), one per
// kept-or-recomputed expert activation of a layer and micro-batch, and
// those of hot-expert replication's moe_hot_experts, one per launch with
// replication on or off. The CPU kernels count; the CUDA ones decide on
// the device and do not.
struct KernelCounters {
  std::atomic<int64_t> activationsKept{0};
  std::atomic<int64_t> activationsRecomputed{0};
  std::atomic<int64_t> replicationOn{0};
  std::atomic<int64_t> replicationOff{0};
};

// Per-call state the runtime supplies.
struct KernelContext {
  int64_t step = 1;        // 1-based optimizer step being computed
  double lr = 0;           // learning rate of this step (optimizer kernels)
  uint64_t seed = 0;       // the spec's seed (dropout masks)
  int64_t update = 1;      // StepValues::update
  int64_t tpRank = 0;      // StepValues::tpRank
  int64_t tpSize = 1;      // StepValues::tpSize
  int64_t cpRank = 0;      // StepValues::cpRank
  int64_t cpSize = 1;      // StepValues::cpSize
  int64_t epRank = 0;      // StepValues::epRank
  ThreadPool *pool = nullptr;          // CPU kernels
  const GpuContext *gpu = nullptr;     // CUDA kernels
  KernelCounters *counters = nullptr;  // CPU kernels; may be null
};

struct KernelArgs {
  absl::Span<const TensorView> ins;
  absl::Span<const TensorView> outs;
  const KernelParams *params = nullptr;
  const KernelContext *ctx = nullptr;
  // The micro-batch of the step this launch computes (the plan's
  // Launch.micro_batch): with the step and seed, the key of random draws.
  int64_t microBatch = 0;
};

enum class Device { kCPU, kCUDA };

struct KernelDef {
  std::string_view name;
  Device device = Device::kCPU;
  // Validates arity, shapes, dtypes and parameters of one launch.
  absl::Status (*check)(const KernelSignature &sig) = nullptr;
  void (*run)(const KernelArgs &args) = nullptr;
};

// One entry per (name, device). Registration is explicit (see
// registerCpuKernels) because static initialisers in static libraries are
// dropped by the linker.
class KernelRegistry {
public:
  absl::Status add(const KernelDef &def);
  // Null when no kernel of that name exists for the device.
  const KernelDef *find(std::string_view name, Device device) const;
  std::vector<std::string_view> names(Device device) const;

private:
  std::vector<KernelDef> defs_;
};

// The registry with every kernel this build has.
const KernelRegistry &defaultKernelRegistry();

}  // namespace braid
