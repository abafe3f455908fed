#include "test/gpu/kernels/common/TwinHarness.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/checks/KernelChecks.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CublasLtApi.h"

namespace braid::gpu_test {
namespace {

absl::Status cudaError(const char *what, cudaError_t err) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err),
                                          " (", cudaGetErrorString(err),
                                          ")"));
}

#define TWIN_CUDA(what, call)                                                 \
  do {                                                                        \
    cudaError_t twinErr = (call);                                             \
    if (twinErr != cudaSuccess)                                               \
      return cudaError(what, twinErr);                                        \
  } while (0)

size_t byteSize(const TensorDesc &d) {
  return static_cast<size_t>(d.numel() * dtypeSize(d.dtype));
}

HostTensor emptyTensor(std::vector<int64_t> shape, DType dtype) {
  HostTensor t;
  t.desc.shape = std::move(shape);
  t.desc.dtype = dtype;
  t.bytes.assign(byteSize(t.desc), 0);
  return t;
}

std::string shapeText(const TensorDesc &d) {
  std::string s = "[";
  for (size_t i = 0; i < d.shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", d.shape[i]);
  absl::StrAppend(&s, "] ", std::string(dtypeName(d.dtype)));
  return s;
}

// Device copies of a launch's tensors, freed on destruction.
struct DeviceTensors {
  std::vector<void *> ins, outs;
  ~DeviceTensors() {
    for (void *p : ins)
      cudaFree(p);
    for (void *p : outs)
      cudaFree(p);
  }
};

// Copies on the harness's own (non-blocking) stream, then waits for them:
// a plain cudaMemcpy from pageable memory runs on the legacy stream and
// may still be in flight when a kernel on another stream starts.
absl::Status upload(const std::vector<HostTensor> &host,
                    std::vector<void *> &dev, cudaStream_t stream) {
  for (const HostTensor &t : host) {
    void *p = nullptr;
    // Even an empty tensor gets a distinct valid address.
    TWIN_CUDA("cudaMalloc",
              cudaMalloc(&p, std::max<size_t>(t.bytes.size(), 256)));
    dev.push_back(p);
    if (!t.bytes.empty())
      TWIN_CUDA("cudaMemcpyAsync to device",
                cudaMemcpyAsync(p, t.bytes.data(), t.bytes.size(),
                                cudaMemcpyHostToDevice, stream));
  }
  TWIN_CUDA("upload", cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace

// --- host tensors -------------------------------------------------------------

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float fromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float HostTensor::at(int64_t i) const {
  switch (desc.dtype) {
  case DType::kF32:
    return f32()[i];
  case DType::kBF16:
    return fromBf16(bf16()[i]);
  case DType::kI32:
    return static_cast<float>(i32()[i]);
  }
  return 0;
}

std::vector<float> HostTensor::toFloats() const {
  std::vector<float> v(numel());
  for (int64_t i = 0; i < numel(); ++i)
    v[i] = at(i);
  return v;
}

const float *HostTensor::f32() const {
  return reinterpret_cast<const float *>(bytes.data());
}
const uint16_t *HostTensor::bf16() const {
  return reinterpret_cast<const uint16_t *>(bytes.data());
}
const int32_t *HostTensor::i32() const {
  return reinterpret_cast<const int32_t *>(bytes.data());
}
float *HostTensor::f32() { return reinterpret_cast<float *>(bytes.data()); }
uint16_t *HostTensor::bf16() {
  return reinterpret_cast<uint16_t *>(bytes.data());
}
int32_t *HostTensor::i32() { return reinterpret_cast<int32_t *>(bytes.data()); }

HostTensor tensorOf(std::vector<int64_t> shape, DType dtype,
                    const std::vector<float> &values) {
  HostTensor t = emptyTensor(std::move(shape), dtype);
  const int64_t n = std::min<int64_t>(t.numel(), values.size());
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32)
      t.f32()[i] = values[i];
    else if (dtype == DType::kBF16)
      t.bf16()[i] = toBf16(values[i]);
    else
      t.i32()[i] = static_cast<int32_t>(values[i]);
  }
  return t;
}

HostTensor i32Tensor(std::vector<int64_t> shape,
                     const std::vector<int32_t> &values) {
  HostTensor t = emptyTensor(std::move(shape), DType::kI32);
  std::memcpy(t.bytes.data(), values.data(),
              std::min(t.bytes.size(), values.size() * 4));
  return t;
}

HostTensor bf16Patterns(std::vector<int64_t> shape,
                        const std::vector<uint16_t> &patterns) {
  HostTensor t = emptyTensor(std::move(shape), DType::kBF16);
  std::memcpy(t.bytes.data(), patterns.data(),
              std::min(t.bytes.size(), patterns.size() * 2));
  return t;
}

HostTensor zeros(std::vector<int64_t> shape, DType dtype) {
  return emptyTensor(std::move(shape), dtype);
}

HostTensor randomTensor(std::vector<int64_t> shape, DType dtype,
                        uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  TensorDesc d{shape, dtype};
  std::vector<float> values(d.numel());
  for (float &v : values)
    v = dist(gen);
  return tensorOf(std::move(shape), dtype, values);
}

HostTensor randomIds(std::vector<int64_t> shape, uint64_t seed, int32_t lo,
                     int32_t hi) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  HostTensor t = emptyTensor(std::move(shape), DType::kI32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.i32()[i] = dist(gen);
  return t;
}

// --- the harness --------------------------------------------------------------

TwinHarness::TwinHarness(std::vector<RegisterFn> families,
                         size_t workspaceBytes)
    : families_(std::move(families)), workspaceBytes_(workspaceBytes) {}

TwinHarness::~TwinHarness() {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  if (stream)
    cudaStreamSynchronize(stream);
  if (handle_ && api_)
    cuda::destroyHandle(*static_cast<const cuda::CublasLtApi *>(api_),
                        static_cast<cublasLtHandle_t>(handle_));
  if (workspace_)
    cudaFree(workspace_);
  if (stepValues_)
    cudaFree(stepValues_);
  if (stream)
    cudaStreamDestroy(stream);
}

absl::Status TwinHarness::ensureRegistered() {
  if (!registered_) {
    registered_ = true;
    registerStatus_ = registerCpuKernels(cpu_);
    for (RegisterFn f : families_)
      if (registerStatus_.ok())
        registerStatus_ = f(gpu_);
  }
  return registerStatus_;
}

absl::Status TwinHarness::setUp() {
  if (absl::Status s = ensureRegistered(); !s.ok())
    return s;
  if (ready_ || !setUpStatus_.ok())
    return setUpStatus_;
  setUpStatus_ = [&]() -> absl::Status {
    absl::StatusOr<const cuda::CublasLtApi *> api = cuda::loadCublasLt();
    if (!api.ok())
      return api.status();
    api_ = *api;
    absl::StatusOr<cublasLtHandle_t> handle = cuda::createHandle(**api);
    if (!handle.ok())
      return handle.status();
    handle_ = *handle;
    cudaStream_t stream = nullptr;
    TWIN_CUDA("cudaStreamCreate",
              cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_ = stream;
    if (workspaceBytes_ > 0)
      TWIN_CUDA("cudaMalloc workspace",
                cudaMalloc(&workspace_, workspaceBytes_));
    TWIN_CUDA("cudaMalloc step values",
              cudaMalloc(&stepValues_, sizeof(StepValues)));
    return absl::OkStatus();
  }();
  ready_ = setUpStatus_.ok();
  return setUpStatus_;
}

absl::StatusOr<GpuContext> TwinHarness::gpuContext() {
  if (absl::Status s = setUp(); !s.ok())
    return s;
  GpuContext gpu;
  gpu.stream = stream_;
  gpu.blasLt = handle_;
  gpu.workspace = workspace_;
  gpu.workspaceBytes = workspaceBytes_;
  gpu.api = api_;
  gpu.stepValues = static_cast<const StepValues *>(stepValues_);
  return gpu;
}

absl::Status TwinHarness::checkLaunch(const TwinLaunch &launch) const {
  KernelCheckFn check = kernelCheck(launch.kernel);
  if (check == nullptr)
    return absl::NotFoundError(
        absl::StrCat("no kernel called '", launch.kernel, "'"));
  std::vector<TensorDesc> ins, outs;
  for (const HostTensor &t : launch.ins)
    ins.push_back(t.desc);
  for (const HostTensor &t : launch.outs)
    outs.push_back(t.desc);
  KernelSignature sig{ins, outs, &launch.params};
  return check(sig);
}

absl::StatusOr<std::vector<HostTensor>>
TwinHarness::runCpu(const TwinLaunch &launch,
                    const std::vector<StepValues> &steps) {
  if (absl::Status s = ensureRegistered(); !s.ok())
    return s;
  if (absl::Status s = checkLaunch(launch); !s.ok())
    return s;
  const KernelDef *def = cpu_.find(launch.kernel, Device::kCPU);
  if (def == nullptr)
    return absl::NotFoundError(
        absl::StrCat("no CPU kernel '", launch.kernel, "'"));
  std::vector<HostTensor> ins = launch.ins, outs = launch.outs;
  std::vector<TensorView> inViews, outViews;
  for (HostTensor &t : ins)
    inViews.push_back(TensorView{t.bytes.data(), &t.desc});
  for (HostTensor &t : outs)
    outViews.push_back(TensorView{t.bytes.data(), &t.desc});
  for (const StepValues &sv : steps) {
    KernelContext ctx;
    ctx.step = sv.step;
    ctx.update = sv.update;
    ctx.lr = sv.lr;
    ctx.seed = sv.seed;
    ctx.tpRank = sv.tpRank;
    ctx.tpSize = sv.tpSize;
    ctx.cpRank = sv.cpRank;
    ctx.cpSize = sv.cpSize;
    KernelArgs args{inViews, outViews, &launch.params, &ctx};
    def->run(args);
  }
  return outs;
}

absl::StatusOr<std::vector<HostTensor>>
TwinHarness::runGpu(const TwinLaunch &launch,
                    const std::vector<StepValues> &steps, GpuMode mode) {
  if (absl::Status s = setUp(); !s.ok())
    return s;
  if (absl::Status s = checkLaunch(launch); !s.ok())
    return s;
  const KernelDef *def = gpu_.find(launch.kernel, Device::kCUDA);
  if (def == nullptr)
    return absl::NotFoundError(
        absl::StrCat("no CUDA kernel '", launch.kernel, "' registered"));
  if (steps.empty())
    return launch.outs;

  cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  DeviceTensors dev;
  if (absl::Status s = upload(launch.ins, dev.ins, stream); !s.ok())
    return s;
  if (absl::Status s = upload(launch.outs, dev.outs, stream); !s.ok())
    return s;
  std::vector<TensorView> inViews, outViews;
  for (size_t i = 0; i < launch.ins.size(); ++i)
    inViews.push_back(TensorView{dev.ins[i], &launch.ins[i].desc});
  for (size_t i = 0; i < launch.outs.size(); ++i)
    outViews.push_back(TensorView{dev.outs[i], &launch.outs[i].desc});

  absl::StatusOr<GpuContext> context = gpuContext();
  if (!context.ok())
    return context.status();
  const GpuContext gpu = *context;

  // The host copy of the first step's values: eager runs see each step's,
  // a graph keeps the first, as the runtime's captured launches do.
  KernelContext ctx;
  ctx.gpu = &gpu;
  auto setHost = [&](const StepValues &sv) {
    ctx.step = sv.step;
    ctx.update = sv.update;
    ctx.lr = sv.lr;
    ctx.seed = sv.seed;
    ctx.tpRank = sv.tpRank;
    ctx.tpSize = sv.tpSize;
    ctx.cpRank = sv.cpRank;
    ctx.cpSize = sv.cpSize;
  };
  auto setDevice = [&](const StepValues &sv) -> absl::Status {
    TWIN_CUDA("cudaMemcpyAsync step values",
              cudaMemcpyAsync(stepValues_, &sv, sizeof(StepValues),
                              cudaMemcpyHostToDevice, stream));
    TWIN_CUDA("step values", cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  KernelArgs args{inViews, outViews, &launch.params, &ctx};

  if (mode == GpuMode::kEager) {
    for (const StepValues &sv : steps) {
      setHost(sv);
      if (absl::Status s = setDevice(sv); !s.ok())
        return s;
      def->run(args);
      TWIN_CUDA("kernel launch", cudaGetLastError());
      TWIN_CUDA("kernel execution", cudaStreamSynchronize(stream));
    }
  } else {
    setHost(steps.front());
    // Global mode: any call that is illegal during capture (allocation,
    // synchronous copies, a sync) from any thread invalidates the capture.
    TWIN_CUDA("cudaStreamBeginCapture",
              cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    def->run(args);
    cudaGraph_t graph = nullptr;
    const cudaError_t endErr = cudaStreamEndCapture(stream, &graph);
    TWIN_CUDA("kernel launch during capture", cudaGetLastError());
    if (endErr != cudaSuccess)
      return cudaError("cudaStreamEndCapture (the kernel is not capturable)",
                       endErr);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instErr = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TWIN_CUDA("cudaGraphInstantiate", instErr);
    absl::Status status;
    for (const StepValues &sv : steps) {
      status = setDevice(sv);
      if (!status.ok())
        break;
      cudaError_t err = cudaGraphLaunch(exec, stream);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) {
        status = cudaError("graph replay", err);
        break;
      }
    }
    cudaGraphExecDestroy(exec);
    if (!status.ok())
      return status;
  }

  std::vector<HostTensor> outs = launch.outs;
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].bytes.empty())
      TWIN_CUDA("cudaMemcpyAsync to host",
                cudaMemcpyAsync(outs[i].bytes.data(), dev.outs[i],
                                outs[i].bytes.size(), cudaMemcpyDeviceToHost,
                                stream));
  TWIN_CUDA("download", cudaStreamSynchronize(stream));
  return outs;
}

absl::StatusOr<TwinOutputs>
TwinHarness::runSteps(const TwinLaunch &launch,
                      const std::vector<StepValues> &steps, GpuMode mode) {
  TwinOutputs outs;
  absl::StatusOr<std::vector<HostTensor>> cpu = runCpu(launch, steps);
  if (!cpu.ok())
    return cpu.status();
  outs.cpu = std::move(*cpu);
  absl::StatusOr<std::vector<HostTensor>> gpu = runGpu(launch, steps, mode);
  if (!gpu.ok())
    return gpu.status();
  outs.gpu = std::move(*gpu);
  return outs;
}

absl::StatusOr<TwinOutputs> TwinHarness::run(const TwinLaunch &launch,
                                             GpuMode mode) {
  return runSteps(launch, {launch.step}, mode);
}

// --- comparison ---------------------------------------------------------------

::testing::AssertionResult closeTo(const HostTensor &expected,
                                   const HostTensor &actual, Tolerance tol) {
  if (expected.desc.shape != actual.desc.shape ||
      expected.desc.dtype != actual.desc.dtype)
    return ::testing::AssertionFailure()
           << "expected " << shapeText(expected.desc) << ", got "
           << shapeText(actual.desc);
  const int64_t n = expected.numel();
  int64_t bad = 0, worst = -1;
  double worstExcess = -1;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    double err = 0;
    if (expected.desc.dtype == DType::kI32) {
      ok = expected.i32()[i] == actual.i32()[i];
    } else {
      const double e = expected.at(i), a = actual.at(i);
      if (std::isnan(e) || std::isnan(a)) {
        ok = std::isnan(e) && std::isnan(a);
      } else if (std::isinf(e) || std::isinf(a)) {
        ok = e == a;
      } else {
        err = std::fabs(a - e);
        ok = err <= tol.atol + tol.rtol * std::fabs(e);
      }
      if (!ok) {
        const double excess = std::isfinite(err)
                                  ? err - tol.atol - tol.rtol * std::fabs(e)
                                  : INFINITY;
        if (excess > worstExcess) {
          worstExcess = excess;
          worst = i;
        }
      }
    }
    if (!ok) {
      if (bad < 5)
        absl::StrAppend(&first, "\n  [", i, "] cpu ", expected.at(i), " gpu ",
                        actual.at(i));
      ++bad;
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << bad << " of " << n << " elements of " << shapeText(expected.desc)
    << " differ beyond rtol " << tol.rtol << " atol " << tol.atol << ":"
    << first;
  if (worst >= 0)
    r << "\n  worst [" << worst << "] cpu " << expected.at(worst) << " gpu "
      << actual.at(worst);
  return r;
}

::testing::AssertionResult twinsAgree(const TwinOutputs &outs,
                                      const std::vector<Tolerance> &tols) {
  if (outs.cpu.size() != outs.gpu.size())
    return ::testing::AssertionFailure()
           << outs.cpu.size() << " CPU outputs, " << outs.gpu.size()
           << " GPU outputs";
  for (size_t i = 0; i < outs.cpu.size(); ++i) {
    const Tolerance tol = tols.empty() ? Tolerance{}
                                       : tols[std::min(i, tols.size() - 1)];
    ::testing::AssertionResult r = closeTo(outs.cpu[i], outs.gpu[i], tol);
    if (!r)
      return ::testing::AssertionFailure() << "output " << i << ": "
                                           << r.message();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult twinsAgree(const TwinOutputs &outs,
                                      Tolerance tol) {
  return twinsAgree(outs, std::vector<Tolerance>{tol});
}

::testing::AssertionResult expectTwins(TwinHarness &harness,
                                       const TwinLaunch &launch,
                                       Tolerance tol, GpuMode mode) {
  absl::StatusOr<TwinOutputs> outs = harness.run(launch, mode);
  if (!outs.ok())
    return ::testing::AssertionFailure()
           << launch.kernel << ": " << outs.status().ToString();
  ::testing::AssertionResult r = twinsAgree(*outs, tol);
  if (!r)
    return ::testing::AssertionFailure() << launch.kernel << ": "
                                         << r.message();
  return r;
}

}  // namespace braid::gpu_test
