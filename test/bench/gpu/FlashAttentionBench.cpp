// braid_flash_attention_bench: times Braid's CUDA attention kernels at the
// GPU benchmark model's attention shapes (docs/benchmarks.md, "Flash
// attention"):
//
//   flash_attention                      forward
//   flash_attention + _grad_input        forward and backward
//   attention (reference, unfused)       forward, probabilities stored
//   attention + attention_grad_input     forward and backward
//
// bf16 storage, causal, q/k/v [B, S, H*Dh] with H = Hkv (multi-head). Each
// figure is the median of CUDA-event-timed runs after warm-up, on random
// data. FLOPs follow the convention of the flash-attention papers'
// benchmarks, so that the rates compare with theirs and with
// sdpa_bench.py's:
//
//   forward           4 B H S^2 Dh, halved when causal
//   backward          2.5 x forward
//   forward+backward  3.5 x forward
//
// Output: one JSON object per line on stdout (a "convention" line first,
// then one line per measurement, written as soon as it is taken, so that a
// run cut short keeps what it measured). Exit status 77 when no CUDA device
// is usable, 1 when a launch fails, 2 for a bad argument.
//
//   braid_flash_attention_bench [--batch B] [--seq S1,S2,...] [--heads H]
//       [--head-dim D] [--causal 0|1] [--warmup N] [--iters N]
//       [--max-seconds T] [--no-reference] [--out FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/registry/Kernel.h"

namespace {

using braid::DType;
using braid::Device;
using braid::GpuContext;
using braid::KernelArgs;
using braid::KernelContext;
using braid::KernelDef;
using braid::KernelParams;
using braid::KernelRegistry;
using braid::KernelSignature;
using braid::StepValues;
using braid::TensorDesc;
using braid::TensorView;

struct Options {
  int64_t batch = 4;
  std::vector<int64_t> seqs = {2048, 4096};
  int64_t heads = 16;
  int64_t headDim = 128;
  bool causal = true;
  int warmup = 2;
  int iters = 10;
  double maxSeconds = 3.0;
  bool reference = true;
  std::string out;
};

FILE *gOut = nullptr;  // --out, besides stdout

void emit(const std::string &line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (gOut) {
    std::fprintf(gOut, "%s\n", line.c_str());
    std::fflush(gOut);
  }
}

std::string quoted(const std::string &s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      r += c;
  }
  return r + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

constexpr const char *kUsage =
    "usage: braid_flash_attention_bench [--batch B] [--seq S1,S2] "
    "[--heads H] [--head-dim D] [--causal 0|1] [--warmup N] [--iters N] "
    "[--max-seconds T] [--no-reference] [--out FILE]\n"
    "Times Braid's CUDA flash_attention and reference attention, forward "
    "and forward+backward (bf16; defaults: B 4, S 2048 and 4096, H 16, Dh "
    "128, causal), and prints one JSON line per figure.\n";

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr, "braid_flash_attention_bench: %s\n%s", why, kUsage);
  std::exit(2);
}

int64_t positive(const char *flag, const char *text) {
  char *end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0)
    usage((std::string(flag) + " needs a positive integer, got '" + text +
           "'").c_str());
  return v;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--batch") {
      o.batch = positive("--batch", value());
    } else if (a == "--seq") {
      o.seqs.clear();
      std::string list = value();
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos)
          comma = list.size();
        const std::string item = list.substr(start, comma - start);
        o.seqs.push_back(positive("--seq", item.c_str()));
        start = comma + 1;
      }
    } else if (a == "--heads") {
      o.heads = positive("--heads", value());
    } else if (a == "--head-dim") {
      o.headDim = positive("--head-dim", value());
    } else if (a == "--causal") {
      const std::string v = value();
      if (v != "0" && v != "1")
        usage("--causal takes 0 or 1");
      o.causal = v == "1";
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(positive("--warmup", value()));
    } else if (a == "--iters") {
      o.iters = static_cast<int>(positive("--iters", value()));
    } else if (a == "--max-seconds") {
      o.maxSeconds = std::atof(value());
      if (!(o.maxSeconds > 0))
        usage("--max-seconds needs a positive number");
    } else if (a == "--no-reference") {
      o.reference = false;
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else {
      usage(("unknown argument '" + a + "'").c_str());
    }
  }
  return o;
}

// --- device memory --------------------------------------------------------------

struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }
  void release() {
    if (ptr)
      cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  bool allocate(size_t n) {
    release();
    if (cudaMalloc(&ptr, std::max<size_t>(n, 256)) != cudaSuccess) {
      ptr = nullptr;
      cudaGetLastError();  // clear the sticky allocation error
      return false;
    }
    bytes = n;
    return true;
  }
};

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float fromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Uniform bf16 values in [-1, 1) from a 64-bit xorshift, copied to `dst`.
bool fillRandom(void *dst, int64_t count, uint64_t seed, cudaStream_t stream) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint16_t &v : host) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float u = static_cast<float>(x >> 40) / 16777216.0f;
    v = toBf16(2.0f * u - 1.0f);
  }
  if (cudaMemcpyAsync(dst, host.data(), host.size() * 2,
                      cudaMemcpyHostToDevice, stream) != cudaSuccess)
    return false;
  return cudaStreamSynchronize(stream) == cudaSuccess;
}

// --- timing -----------------------------------------------------------------------

struct Timing {
  double medianMs = NAN, minMs = NAN;
  int iters = 0;
  std::string error;
};

// Runs `enqueue` `warmup` times (fewer when one run is slow), then up to
// `iters` timed runs, stopping once `maxSeconds` of timed runs are spent.
Timing measure(const std::function<void()> &enqueue, cudaStream_t stream,
               const Options &o) {
  Timing t;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto failed = [&](const char *what, cudaError_t err) {
    t.error = std::string(what) + ": " + cudaGetErrorName(err) + " (" +
              cudaGetErrorString(err) + ")";
    return t;
  };
  float spentMs = 0;
  for (int i = 0; i < o.warmup; ++i) {
    cudaEventRecord(start, stream);
    enqueue();
    cudaEventRecord(stop, stream);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return failed("launch", err);
    if (cudaError_t err = cudaEventSynchronize(stop); err != cudaSuccess)
      return failed("execution", err);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    spentMs += ms;
    if (spentMs > 500.0 * o.maxSeconds)
      break;
  }
  std::vector<double> times;
  double total = 0;
  for (int i = 0; i < o.iters; ++i) {
    cudaEventRecord(start, stream);
    enqueue();
    cudaEventRecord(stop, stream);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return failed("launch", err);
    if (cudaError_t err = cudaEventSynchronize(stop); err != cudaSuccess)
      return failed("execution", err);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
    total += ms;
    if (total > 1000.0 * o.maxSeconds)
      break;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  t.iters = static_cast<int>(times.size());
  t.minMs = times.front();
  const size_t n = times.size();
  t.medianMs = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  return t;
}

// --- one shape ----------------------------------------------------------------------

struct Launch {
  const KernelDef *def = nullptr;
  std::vector<TensorDesc> inDescs, outDescs;
  std::vector<void *> inPtrs, outPtrs;
  std::vector<TensorView> ins, outs;
  KernelArgs args;

  // Binds the views and runs the shared load-time check of the kernel.
  absl::Status bind(const KernelParams &params, const KernelContext &ctx) {
    ins.clear();
    outs.clear();
    for (size_t i = 0; i < inDescs.size(); ++i)
      ins.push_back(TensorView{inPtrs[i], &inDescs[i]});
    for (size_t i = 0; i < outDescs.size(); ++i)
      outs.push_back(TensorView{outPtrs[i], &outDescs[i]});
    args = KernelArgs{ins, outs, &params, &ctx};
    return def->check(KernelSignature{inDescs, outDescs, &params});
  }
  void run() const { def->run(args); }
};

struct Shape {
  int64_t b, s, h, dh;
  bool causal;
  double forwardFlops() const {
    const double f = 4.0 * b * h * static_cast<double>(s) * s * dh;
    return causal ? f / 2 : f;
  }
  std::string json() const {
    return "\"batch\":" + std::to_string(b) + ",\"seq\":" + std::to_string(s) +
           ",\"heads\":" + std::to_string(h) +
           ",\"kv_heads\":" + std::to_string(h) +
           ",\"head_dim\":" + std::to_string(dh) +
           ",\"causal\":" + (causal ? "true" : "false") + ",\"dtype\":\"bf16\"";
  }
};

void report(const Shape &shape, const std::string &impl,
            const std::string &kernels, const std::string &pass,
            double flops, const Timing &t, const std::string &extra = "") {
  std::string line = "{\"impl\":" + quoted(impl) + ",\"kernels\":" +
                     quoted(kernels) + ",\"pass\":" + quoted(pass) + "," +
                     shape.json() + ",\"flops\":" + number(flops);
  if (!t.error.empty()) {
    line += ",\"error\":" + quoted(t.error) + "}";
  } else {
    line += ",\"ms\":" + number(t.medianMs) + ",\"ms_min\":" + number(t.minMs) +
            ",\"iters\":" + std::to_string(t.iters) +
            ",\"tflops\":" + number(flops / (t.medianMs * 1e-3) / 1e12) + extra +
            "}";
  }
  emit(line);
  std::fprintf(stderr, "[flash] %-16s %-8s B=%lld S=%lld: %s\n", impl.c_str(),
               pass.c_str(), static_cast<long long>(shape.b),
               static_cast<long long>(shape.s),
               t.error.empty()
                   ? (number(t.medianMs) + " ms, " +
                      number(flops / (t.medianMs * 1e-3) / 1e12) + " TFLOP/s")
                         .c_str()
                   : t.error.c_str());
}

void skipLine(const Shape &shape, const std::string &impl,
              const std::string &why) {
  emit("{\"impl\":" + quoted(impl) + "," + shape.json() +
       ",\"skipped\":" + quoted(why) + "}");
}

// Largest |a - b| over two bf16 device tensors of `count` elements.
double maxAbsDiff(const void *a, const void *b, int64_t count,
                  cudaStream_t stream) {
  std::vector<uint16_t> ha(static_cast<size_t>(count)),
      hb(static_cast<size_t>(count));
  if (cudaMemcpyAsync(ha.data(), a, ha.size() * 2, cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess ||
      cudaMemcpyAsync(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return NAN;
  double worst = 0;
  for (size_t i = 0; i < ha.size(); ++i) {
    const double d = std::fabs(static_cast<double>(fromBf16(ha[i])) -
                               static_cast<double>(fromBf16(hb[i])));
    if (!(d <= worst))  // NaN wins
      worst = d;
  }
  return worst;
}

// Returns false after a failed launch (the context may be unusable).
bool benchShape(const Shape &shape, const Options &o,
                const KernelRegistry &registry, const GpuContext &gpu) {
  cudaStream_t stream = static_cast<cudaStream_t>(gpu.stream);
  const int64_t hd = shape.h * shape.dh;
  const int64_t act = shape.b * shape.s * hd;
  const int64_t rows = shape.b * shape.h * shape.s;
  const TensorDesc actDesc{{shape.b, shape.s, hd}, DType::kBF16};
  const TensorDesc lseDesc{{shape.b, shape.h, shape.s}, DType::kF32};
  const TensorDesc probsDesc{{shape.b, shape.h, shape.s, shape.s},
                             DType::kBF16};

  DeviceBuffer q, k, v, o1, dout, dq, dk, dv, lse, oRef;
  for (DeviceBuffer *buf : {&q, &k, &v, &o1, &dout, &dq, &dk, &dv, &oRef})
    if (!buf->allocate(static_cast<size_t>(act) * 2)) {
      skipLine(shape, "braid_flash", "not enough device memory");
      return true;
    }
  if (!lse.allocate(static_cast<size_t>(rows) * 4)) {
    skipLine(shape, "braid_flash", "not enough device memory");
    return true;
  }
  if (!fillRandom(q.ptr, act, 1, stream) || !fillRandom(k.ptr, act, 2, stream) ||
      !fillRandom(v.ptr, act, 3, stream) ||
      !fillRandom(dout.ptr, act, 4, stream)) {
    skipLine(shape, "braid_flash", "could not upload the inputs");
    return true;
  }

  KernelParams params;
  params.setInt("num_heads", shape.h);
  params.setInt("num_kv_heads", shape.h);
  params.setInt("causal", shape.causal ? 1 : 0);
  params.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(shape.dh)));
  params.setFloat("dropout", 0.0);
  KernelContext ctx;
  ctx.gpu = &gpu;

  const double fwd = shape.forwardFlops();
  bool ok = true;

  // Flash attention.
  Launch flash, flashGrad;
  flash.def = registry.find("flash_attention", Device::kCUDA);
  flash.inDescs = {actDesc, actDesc, actDesc};
  flash.inPtrs = {q.ptr, k.ptr, v.ptr};
  flash.outDescs = {actDesc, lseDesc};
  flash.outPtrs = {o1.ptr, lse.ptr};
  flashGrad.def = registry.find("flash_attention_grad_input", Device::kCUDA);
  flashGrad.inDescs = {actDesc, actDesc, actDesc, actDesc, actDesc, lseDesc};
  flashGrad.inPtrs = {dout.ptr, q.ptr, k.ptr, v.ptr, o1.ptr, lse.ptr};
  flashGrad.outDescs = {actDesc, actDesc, actDesc};
  flashGrad.outPtrs = {dq.ptr, dk.ptr, dv.ptr};
  if (!flash.def || !flashGrad.def) {
    skipLine(shape, "braid_flash", "no CUDA flash_attention in this build");
  } else if (absl::Status s = flash.bind(params, ctx); !s.ok()) {
    skipLine(shape, "braid_flash", std::string(s.message()));
  } else if (absl::Status s2 = flashGrad.bind(params, ctx); !s2.ok()) {
    skipLine(shape, "braid_flash", std::string(s2.message()));
  } else {
    const std::string names = "flash_attention";
    Timing t = measure([&] { flash.run(); }, stream, o);
    report(shape, "braid_flash", names, "fwd", fwd, t);
    ok = ok && t.error.empty();
    if (ok) {
      Timing tb = measure(
          [&] {
            flash.run();
            flashGrad.run();
          },
          stream, o);
      report(shape, "braid_flash", names + "+flash_attention_grad_input",
             "fwd+bwd", 3.5 * fwd, tb);
      ok = tb.error.empty();
      // o1 holds the last forward's output again for the comparison.
    }
  }
  dq.release();
  dk.release();
  dv.release();
  lse.release();

  // The reference: scores, softmax and the value product with the
  // [B, H, S, S] probabilities stored for the backward pass.
  if (ok && o.reference) {
    DeviceBuffer probs, rq, rk, rv;
    const size_t probsBytes = static_cast<size_t>(probsDesc.numel()) * 2;
    if (!probs.allocate(probsBytes) || !rq.allocate(act * 2) ||
        !rk.allocate(act * 2) || !rv.allocate(act * 2)) {
      skipLine(shape, "braid_reference",
               "not enough device memory for the probabilities (" +
                   std::to_string(probsBytes >> 20) + " MiB)");
      return ok;
    }
    Launch ref, refGrad;
    ref.def = registry.find("attention", Device::kCUDA);
    ref.inDescs = {actDesc, actDesc, actDesc};
    ref.inPtrs = {q.ptr, k.ptr, v.ptr};
    ref.outDescs = {actDesc, probsDesc};
    ref.outPtrs = {oRef.ptr, probs.ptr};
    refGrad.def = registry.find("attention_grad_input", Device::kCUDA);
    refGrad.inDescs = {actDesc, actDesc, actDesc, actDesc, probsDesc};
    refGrad.inPtrs = {dout.ptr, q.ptr, k.ptr, v.ptr, probs.ptr};
    refGrad.outDescs = {actDesc, actDesc, actDesc};
    refGrad.outPtrs = {rq.ptr, rk.ptr, rv.ptr};
    if (!ref.def || !refGrad.def) {
      skipLine(shape, "braid_reference", "no CUDA attention in this build");
    } else if (absl::Status s = ref.bind(params, ctx); !s.ok()) {
      skipLine(shape, "braid_reference", std::string(s.message()));
    } else if (absl::Status s2 = refGrad.bind(params, ctx); !s2.ok()) {
      skipLine(shape, "braid_reference", std::string(s2.message()));
    } else {
      Timing t = measure([&] { ref.run(); }, stream, o);
      std::string extra;
      if (t.error.empty()) {
        // The flash output against the reference's, both bf16.
        extra = ",\"flash_max_abs_diff\":" +
                number(maxAbsDiff(o1.ptr, oRef.ptr, act, stream));
      }
      report(shape, "braid_reference", "attention", "fwd", fwd, t, extra);
      ok = t.error.empty();
      if (ok) {
        Timing tb = measure(
            [&] {
              ref.run();
              refGrad.run();
            },
            stream, o);
        report(shape, "braid_reference", "attention+attention_grad_input",
               "fwd+bwd", 3.5 * fwd, tb);
        ok = tb.error.empty();
      }
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parseOptions(argc, argv);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("braid_flash_attention_bench: no usable CUDA device (%s): "
                "skipping\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return 77;
  }
  if (!o.out.empty()) {
    gOut = std::fopen(o.out.c_str(), "w");
    if (!gOut) {
      std::fprintf(stderr, "braid_flash_attention_bench: cannot write %s\n",
                   o.out.c_str());
      return 2;
    }
  }

  KernelRegistry registry;
  using RegisterFn = absl::Status (*)(KernelRegistry &);
  for (RegisterFn reg : {braid::cuda::registerAttentionKernels,
                         braid::cuda::registerFusedAttentionKernels}) {
    if (absl::Status s = reg(registry); !s.ok()) {
      std::fprintf(stderr, "braid_flash_attention_bench: %s\n",
                   s.ToString().c_str());
      return 1;
    }
  }

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  cudaStream_t stream = nullptr;
  void *stepValues = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
          cudaSuccess ||
      cudaMalloc(&stepValues, sizeof(StepValues)) != cudaSuccess) {
    std::fprintf(stderr, "braid_flash_attention_bench: cannot set up the "
                         "stream: %s\n",
                 cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const StepValues first{};
  cudaMemcpy(stepValues, &first, sizeof first, cudaMemcpyHostToDevice);
  GpuContext gpu;
  gpu.stream = stream;
  gpu.stepValues = static_cast<const StepValues *>(stepValues);

  emit("{\"convention\":\"forward FLOPs 4*B*H*S^2*Dh, halved when causal; "
       "backward 2.5x forward; forward+backward 3.5x forward\","
       "\"timing\":\"median of CUDA-event-timed runs after warm-up\","
       "\"device\":" +
       quoted(prop.name) + ",\"warmup\":" + std::to_string(o.warmup) +
       ",\"max_iters\":" + std::to_string(o.iters) + "}");

  int rc = 0;
  for (int64_t s : o.seqs) {
    const Shape shape{o.batch, s, o.heads, o.headDim, o.causal};
    if (!benchShape(shape, o, registry, gpu)) {
      rc = 1;
      break;
    }
  }
  cudaFree(stepValues);
  cudaStreamDestroy(stream);
  if (gOut)
    std::fclose(gOut);
  return rc;
}
