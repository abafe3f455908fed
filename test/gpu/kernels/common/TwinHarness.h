// Runs a kernel of docs/kernels.md on the CPU and its CUDA twin on the same
// host inputs, and compares the outputs (docs/gpu-backend.md, "Tests").
//
// A test builds a TwinLaunch (kernel name, host tensors, parameters, step
// values), and calls TwinHarness::run, which
//   - validates the launch with the shared check (kernelCheck(name)),
//   - runs the CPU kernel of registerCpuKernels on copies of the tensors,
//   - copies the same tensors to the device and runs the CUDA entry that the
//     harness's registration functions added, on a stream of its own, with
//     a cuBLASLt handle, a workspace and a device StepValues,
//   - and returns both sets of outputs, which expectClose compares.
// Outputs start from the values the launch gives them, so `accumulate`
// and in-place kernels (adamw) are tested like any other.
//
// A launch may run several times in a row on the same buffers, each time
// with other step values (runSteps): the optimizer's state carries over.
// With GpuMode::kGraph the CUDA side captures the launch once in a CUDA
// graph, with the first step values, and replays it for every step after
// writing that step's values to the device, exactly as the runtime does;
// a kernel that took a step value from its launch arguments fails there.
//
// bf16 tensors hold 16-bit patterns (the upper half of an fp32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/registry/Kernel.h"

namespace braid::gpu_test {

// --- host tensors -------------------------------------------------------

struct HostTensor {
  TensorDesc desc;
  // numel * dtypeSize(desc.dtype) bytes, as the kernel stores them.
  std::vector<uint8_t> bytes;

  int64_t numel() const { return desc.numel(); }
  // Element i as f32 (bf16 widened exactly, i32 converted).
  float at(int64_t i) const;
  std::vector<float> toFloats() const;
  // Typed views; the dtype must match.
  const float *f32() const;
  const uint16_t *bf16() const;
  const int32_t *i32() const;
  float *f32();
  uint16_t *bf16();
  int32_t *i32();
};

// A tensor of `dtype` holding `values` (rounded to nearest even for bf16).
HostTensor tensorOf(std::vector<int64_t> shape, DType dtype,
                    const std::vector<float> &values);
HostTensor i32Tensor(std::vector<int64_t> shape,
                     const std::vector<int32_t> &values);
HostTensor bf16Patterns(std::vector<int64_t> shape,
                        const std::vector<uint16_t> &patterns);
// All zeros (+0 in every dtype).
HostTensor zeros(std::vector<int64_t> shape, DType dtype);
// Uniform in [lo, hi), reproducible from `seed`, rounded to `dtype`.
HostTensor randomTensor(std::vector<int64_t> shape, DType dtype,
                        uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Uniform integers in [lo, hi).
HostTensor randomIds(std::vector<int64_t> shape, uint64_t seed, int32_t lo,
                     int32_t hi);

// Round-to-nearest-even f32 -> bf16 and the exact widening, on the host.
uint16_t toBf16(float f);
float fromBf16(uint16_t b);

// --- launches -------------------------------------------------------------

struct TwinLaunch {
  std::string kernel;
  std::vector<HostTensor> ins;
  // Initial contents of the outputs (zeros() when the kernel overwrites).
  std::vector<HostTensor> outs;
  KernelParams params;
  // Step values of the (first) run; runSteps takes one per run.
  StepValues step;
};

struct TwinOutputs {
  std::vector<HostTensor> cpu;
  std::vector<HostTensor> gpu;
};

enum class GpuMode {
  kEager,  // run() once per step on the stream
  kGraph,  // captured once, replayed per step (see above)
};

// Registers one family of CUDA kernels (a braid::cuda::register*Kernels).
using RegisterFn = absl::Status (*)(KernelRegistry &registry);

class TwinHarness {
public:
  // The CUDA side has the kernels that `families` register; the CPU side
  // has all of registerCpuKernels. Nothing touches the device until the
  // first run.
  explicit TwinHarness(std::vector<RegisterFn> families,
                       size_t workspaceBytes = size_t{64} << 20);
  ~TwinHarness();
  TwinHarness(const TwinHarness &) = delete;
  TwinHarness &operator=(const TwinHarness &) = delete;

  // One run of each side.
  absl::StatusOr<TwinOutputs> run(const TwinLaunch &launch,
                                  GpuMode mode = GpuMode::kEager);
  // steps.size() runs of each side on the same buffers, run i with
  // steps[i]; returns the outputs after the last.
  absl::StatusOr<TwinOutputs> runSteps(const TwinLaunch &launch,
                                       const std::vector<StepValues> &steps,
                                       GpuMode mode = GpuMode::kEager);

  // Either side alone.
  absl::StatusOr<std::vector<HostTensor>>
  runCpu(const TwinLaunch &launch, const std::vector<StepValues> &steps);
  absl::StatusOr<std::vector<HostTensor>>
  runGpu(const TwinLaunch &launch, const std::vector<StepValues> &steps,
         GpuMode mode);

  size_t workspaceBytes() const { return workspaceBytes_; }

  // The harness's CUDA objects as a kernel sees them (its stream, cuBLASLt
  // and handle, workspace, device StepValues), for tests that enqueue work
  // by hand; set up on first use.
  absl::StatusOr<GpuContext> gpuContext();

private:
  absl::Status ensureRegistered();  // both registries, once
  absl::Status setUp();             // the CUDA objects, once
  absl::Status checkLaunch(const TwinLaunch &launch) const;

  std::vector<RegisterFn> families_;
  size_t workspaceBytes_;
  KernelRegistry cpu_, gpu_;
  bool registered_ = false;
  absl::Status registerStatus_;
  bool ready_ = false;
  absl::Status setUpStatus_;
  // CUDA objects, opaque here so that tests need no CUDA header.
  void *stream_ = nullptr;
  void *handle_ = nullptr;
  const void *api_ = nullptr;
  void *workspace_ = nullptr;
  void *stepValues_ = nullptr;
};

// --- comparison -------------------------------------------------------------

// |gpu - cpu| <= atol + rtol * |cpu| for every element; NaN matches NaN
// only, an infinity only the same infinity. i32 tensors must be equal.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// Exact equality, bit for bit (what deterministic kernels promise where
// they do what the CPU does).
inline constexpr Tolerance kExact{0, 0};

::testing::AssertionResult closeTo(const HostTensor &expected,
                                   const HostTensor &actual, Tolerance tol);
// Every output pair of `outs`, named by index in the message.
::testing::AssertionResult twinsAgree(const TwinOutputs &outs,
                                      Tolerance tol);
// One tolerance per output.
::testing::AssertionResult twinsAgree(const TwinOutputs &outs,
                                      const std::vector<Tolerance> &tols);

// Runs and compares in one: EXPECT_TRUE(expectTwins(h, launch, tol)).
::testing::AssertionResult expectTwins(TwinHarness &harness,
                                       const TwinLaunch &launch,
                                       Tolerance tol,
                                       GpuMode mode = GpuMode::kEager);

}  // namespace braid::gpu_test
