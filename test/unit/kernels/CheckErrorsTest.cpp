// Every kernel's check: a valid launch passes; each kind of bad input is
// refused with a message that names the kernel and what is wrong.
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/registry/Kernel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A launch as check() sees it: descriptors and parameters only.
struct Sig {
  std::string kernel;
  std::vector<TensorDesc> ins, outs;
  KernelParams params;

  Sig &in(std::vector<int64_t> s, DType t = DType::kF32) {
    ins.push_back({std::move(s), t});
    return *this;
  }
  Sig &out(std::vector<int64_t> s, DType t = DType::kF32) {
    outs.push_back({std::move(s), t});
    return *this;
  }
  Sig &i(const char *n, int64_t v) {
    params.setInt(n, v);
    return *this;
  }
  Sig &f(const char *n, double v) {
    params.setFloat(n, v);
    return *this;
  }
  absl::Status check() const {
    const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
    if (!def)
      return absl::NotFoundError(kernel);
    return def->check(KernelSignature{ins, outs, &params});
  }
};

constexpr DType kI32 = DType::kI32;

// One valid launch of every kernel in the catalogue.
std::map<std::string, Sig> validLaunches() {
  std::map<std::string, Sig> m;
  auto add = [&](const char *name) -> Sig & {
    Sig &s = m[name];
    s.kernel = name;
    return s;
  };
  add("embedding").in({11, 4}).in({2, 3}, kI32).out({2, 3, 4});
  add("embedding_grad_weight")
      .in({2, 3, 4})
      .in({2, 3}, kI32)
      .out({11, 4})
      .i("accumulate", 1);
  add("linear").in({2, 3, 4}).in({5, 4}).in({5}).out({2, 3, 5});
  add("linear_grad_input").in({2, 3, 5}).in({5, 4}).out({2, 3, 4});
  add("linear_grad_weight").in({2, 3, 5}).in({2, 3, 4}).out({5, 4}).out({5});
  add("layer_norm").in({2, 8}).in({8}).in({8}).out({2, 8}).out({2}).out({2});
  m["layer_norm"].f("eps", 1e-5);
  add("layer_norm_grad_input")
      .in({2, 8})
      .in({2, 8})
      .in({8})
      .in({2})
      .in({2})
      .out({2, 8});
  add("layer_norm_grad_weight")
      .in({2, 8})
      .in({2, 8})
      .in({2})
      .in({2})
      .out({8})
      .out({8});
  add("rms_norm").in({2, 8}).in({8}).out({2, 8}).out({2}).f("eps", 1e-6);
  add("rms_norm_grad_input").in({2, 8}).in({2, 8}).in({8}).in({2}).out({2, 8});
  add("rms_norm_grad_weight").in({2, 8}).in({2, 8}).in({2}).out({8});
  auto attn = [](Sig &s) {
    s.i("num_heads", 4).i("num_kv_heads", 2).i("causal", 1);
    s.f("scale", 0.5).f("dropout", 0.1).i("rng_offset", 3);
  };
  attn(add("attention")
           .in({2, 3, 16})
           .in({2, 3, 8})
           .in({2, 3, 8})
           .out({2, 3, 16})
           .out({2, 4, 3, 3}));
  attn(add("attention_grad_input")
           .in({2, 3, 16})
           .in({2, 3, 16})
           .in({2, 3, 8})
           .in({2, 3, 8})
           .in({2, 4, 3, 3})
           .out({2, 3, 16})
           .out({2, 3, 8})
           .out({2, 3, 8}));
  add("repeat_kv")
      .in({2, 3, 8})
      .out({2, 3, 16})
      .i("num_heads", 4)
      .i("num_kv_heads", 2);
  add("repeat_kv_grad_input")
      .in({2, 3, 16})
      .out({2, 3, 8})
      .i("num_heads", 4)
      .i("num_kv_heads", 2);
  add("rope").in({2, 3, 16}).out({2, 3, 16}).i("num_heads", 2).f("theta", 1e4);
  add("rope_grad_input")
      .in({2, 3, 16})
      .out({2, 3, 16})
      .i("num_heads", 2)
      .f("theta", 1e4);
  add("gelu").in({3, 5}).out({3, 5});
  add("gelu_grad_input").in({3, 5}).in({3, 5}).out({3, 5});
  add("swiglu").in({3, 5}).in({3, 5}).out({3, 5});
  add("swiglu_grad_input")
      .in({3, 5})
      .in({3, 5})
      .in({3, 5})
      .out({3, 5})
      .out({3, 5});
  add("add").in({3, 5}).in({3, 5}).out({3, 5});
  add("dropout").in({3, 5}).out({3, 5}).f("p", 0.1).i("rng_offset", 0);
  add("dropout_grad_input")
      .in({3, 5})
      .out({3, 5})
      .f("p", 0.1)
      .i("rng_offset", 0);
  add("split").in({2, 9}).out({2, 3}).out({2, 3}).out({2, 3});
  add("split_grad_input").in({2, 3}).in({2, 3}).out({2, 6});
  add("cross_entropy").in({2, 3, 7}).in({2, 3}, kI32).out({}).out({2, 3});
  add("cross_entropy_grad_input")
      .in({2, 3, 7})
      .in({2, 3}, kI32)
      .in({2, 3})
      .out({2, 3, 7})
      .f("scale", 1.0);
  add("accumulate").in({4}).out({4});
  add("fill").out({4}).f("value", 0.0);
  add("grad_norm").in({4}).in({2, 3}).out({});
  add("adamw")
      .in({4, 2})
      .in({})
      .out({4, 2})
      .out({4, 2})
      .out({4, 2})
      .f("beta1", 0.9)
      .f("beta2", 0.999)
      .f("eps", 1e-8)
      .f("weight_decay", 0.1)
      .f("grad_clip", 1.0);
  return m;
}

TEST(Check, EveryKernelHasAValidLaunch) {
  const auto launches = validLaunches();
  for (std::string_view name : defaultKernelRegistry().names(Device::kCPU)) {
    auto it = launches.find(std::string(name));
    ASSERT_NE(it, launches.end()) << "no valid launch for " << name;
    absl::Status s = it->second.check();
    EXPECT_TRUE(s.ok()) << s;
  }
}

// bf16 is for the GPU backend: every float operand of every kernel refuses
// it, naming the operand.
TEST(Check, EveryFloatOperandRefusesBf16) {
  for (const auto &[name, valid] : validLaunches()) {
    for (int side = 0; side < 2; ++side) {
      const auto &ops = side == 0 ? valid.ins : valid.outs;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].dtype != DType::kF32)
          continue;
        Sig bad = valid;
        (side == 0 ? bad.ins : bad.outs)[i].dtype = DType::kBF16;
        absl::Status s = bad.check();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
        EXPECT_THAT(std::string(s.message()),
                    StartsWith(name + ": " +
                               (side == 0 ? "input " : "output ") +
                               std::to_string(i) + " ("));
        EXPECT_THAT(std::string(s.message()), HasSubstr("bf16"));
      }
    }
  }
}

// Every kernel refuses a negative dimension on its first operand.
TEST(Check, NegativeDimensionsAreRefused) {
  for (const auto &[name, valid] : validLaunches()) {
    Sig bad = valid;
    auto &ops = bad.ins.empty() ? bad.outs : bad.ins;
    if (ops[0].shape.empty())
      continue;
    ops[0].shape[0] = -1;
    EXPECT_THAT(std::string(bad.check().message()),
                HasSubstr("negative dimension"))
        << name;
  }
}

struct BadCase {
  std::string kernel;
  std::function<void(Sig &)> spoil;
  std::string message;
};

void PrintTo(const BadCase &c, std::ostream *os) {
  *os << c.kernel << " -> \"" << c.message << "\"";
}

class CheckRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(CheckRefuses, WithMessage) {
  const BadCase &c = GetParam();
  Sig s = validLaunches().at(c.kernel);
  c.spoil(s);
  absl::Status status = s.check();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
}

// Drops parameter `name` by rebuilding the set without it.
void dropParam(Sig &s, const std::string &name,
               const std::vector<std::pair<std::string, double>> &floats,
               const std::vector<std::pair<std::string, int64_t>> &ints) {
  s.params = KernelParams();
  for (auto &[n, v] : floats)
    if (n != name)
      s.params.setFloat(n, v);
  for (auto &[n, v] : ints)
    if (n != name)
      s.params.setInt(n, v);
}

std::vector<BadCase> badCases() {
  auto withoutAttnParam = [](const std::string &name) {
    return [name](Sig &s) {
      dropParam(s, name, {{"scale", 0.5}, {"dropout", 0.1}},
                {{"num_heads", 4},
                 {"num_kv_heads", 2},
                 {"causal", 1},
                 {"rng_offset", 3}});
    };
  };
  return {
      {"linear",
       [](Sig &s) {
         s.ins = {{{2, 4}}, {{3, 5}}};
         s.outs = {{{2, 3}}};
       },
       "linear: input 1 (weight) has shape [3, 5], expected [M, 4] to match "
       "input 0's last dimension 4"},
      {"linear", [](Sig &s) { s.ins.resize(1); },
       "linear: expected 2 to 3 inputs (x, weight, optional bias), got 1"},
      {"linear", [](Sig &s) { s.ins[2].shape = {4}; },
       "linear: input 2 (bias) has shape [4], expected [5]"},
      {"linear",
       [](Sig &s) {
         s.outs[0].shape = {6, 5};
       },
       "linear: output 0 (y) has shape [6, 5], expected [2, 3, 5]"},
      {"linear", [](Sig &s) { s.outs.push_back({{1}}); },
       "linear: expected 1 output (y), got 2"},
      {"linear_grad_input", [](Sig &s) { s.params.setInt("accumulate", 2); },
       "linear_grad_input: parameter 'accumulate' is 2, expected a value in "
       "[0, 1]"},
      {"linear_grad_weight",
       [](Sig &s) {
         s.ins[1].shape = {3, 2, 4};
       },
       "linear_grad_weight: input 1 (x) has shape [3, 2, 4], expected the "
       "leading dimensions of input 0 (dy)"},
      {"embedding", [](Sig &s) { s.ins[1].dtype = DType::kF32; },
       "embedding: input 1 (ids) has dtype f32, expected i32"},
      {"embedding",
       [](Sig &s) {
         s.ins[0].shape = {11, 4, 1};
       },
       "embedding: input 0 (table) has shape [11, 4, 1], expected rank 2"},
      {"layer_norm", [](Sig &s) { s.params = KernelParams(); },
       "layer_norm: missing float parameter 'eps'"},
      {"layer_norm", [](Sig &s) { s.params.setFloat("eps", 0); },
       "layer_norm: parameter 'eps' is 0, expected a positive number"},
      {"layer_norm", [](Sig &s) { s.params.setFloat("eps", NAN); },
       "expected a finite number"},
      {"layer_norm", [](Sig &s) { s.outs[1].shape = {8}; },
       "layer_norm: output 1 (mean) has shape [8], expected [2]"},
      {"rms_norm", [](Sig &s) { s.ins[1].shape = {7}; },
       "rms_norm: input 1 (gamma) has shape [7], expected [8]"},
      {"rms_norm",
       [](Sig &s) {
         s.ins[0].shape = {2, 0};
         s.outs[0].shape = {2, 0};
       },
       "the normalised dimension D must not be empty"},
      {"rms_norm_grad_input",
       [](Sig &s) {
         s.ins[0].shape = {2, 9};
       },
       "rms_norm_grad_input: input 0 (dy) has shape [2, 9], expected [2, 8], "
       "the shape of input 1 (x)"},
      {"attention", [](Sig &s) { s.params.setInt("num_kv_heads", 3); },
       "attention: num_kv_heads (3) does not divide num_heads (4)"},
      {"attention", withoutAttnParam("num_heads"),
       "attention: missing integer parameter 'num_heads'"},
      {"attention", withoutAttnParam("scale"),
       "attention: missing float parameter 'scale'"},
      {"attention", withoutAttnParam("rng_offset"),
       "attention: missing integer parameter 'rng_offset'"},
      {"attention", [](Sig &s) { s.params.setFloat("num_heads", 4.0); },
       "attention: parameter 'num_heads' is a float"},
      {"attention", [](Sig &s) { s.params.setInt("causal", 2); },
       "attention: parameter 'causal' is 2, expected a value in [0, 1]"},
      {"attention", [](Sig &s) { s.params.setFloat("dropout", 1.0); },
       "attention: parameter 'dropout' is 1, expected 0 <= dropout < 1"},
      {"attention",
       [](Sig &s) {
         s.ins[1].shape = {2, 3, 16};
       },
       "attention: input 1 (k) has shape [2, 3, 16], expected [2, 3, 8] "
       "([B, S, num_kv_heads * Dh] with Dh = 4)"},
      {"attention",
       [](Sig &s) {
         s.outs[1].shape = {2, 4, 3, 4};
       },
       "attention: output 1 (probs) has shape [2, 4, 3, 4], expected "
       "[2, 4, 3, 3]"},
      {"attention", [](Sig &s) { s.params.setInt("num_heads", 6); },
       "its last dimension must be num_heads (6) times a head dimension"},
      {"attention_grad_input",
       [](Sig &s) {
         s.outs[1].shape = {2, 3, 16};
       },
       "attention_grad_input: output 1 (dk) has shape [2, 3, 16], expected "
       "[2, 3, 8], the shape of input 2 (k)"},
      {"repeat_kv",
       [](Sig &s) {
         s.outs[0].shape = {2, 3, 12};
       },
       "repeat_kv: output 0 (y) has shape [2, 3, 12], expected [2, 3, 16]"},
      {"rope", [](Sig &s) { s.params.setInt("num_heads", 16); },
       "rope: head dimension 16 / 16 = 1 is not a positive even number"},
      {"rope", [](Sig &s) { s.params.setFloat("theta", -1); },
       "rope: parameter 'theta' is -1, expected a positive number"},
      {"rope",
       [](Sig &s) {
         s.ins[0].shape = {6, 16};
       },
       "rope: input 0 (x) has shape [6, 16], expected rank 3 [B, S, H*Dh]"},
      {"gelu_grad_input",
       [](Sig &s) {
         s.ins[1].shape = {5, 3};
       },
       "gelu_grad_input: input 1 (x) has shape [5, 3], expected [3, 5]"},
      {"swiglu", [](Sig &s) { s.ins.pop_back(); },
       "swiglu: expected 2 inputs (gate, up), got 1"},
      {"add", [](Sig &s) { s.outs[0].shape = {15}; },
       "add: output 0 (c) has shape [15], expected [3, 5]"},
      {"dropout", [](Sig &s) { s.params.setFloat("p", 1.0); },
       "dropout: parameter 'p' is 1, expected 0 <= p < 1"},
      {"dropout", [](Sig &s) { s.params.setFloat("p", -0.5); },
       "dropout: parameter 'p' is -0.5, expected 0 <= p < 1"},
      {"dropout_grad_input",
       [](Sig &s) {
         dropParam(s, "rng_offset", {{"p", 0.1}}, {});
       },
       "dropout_grad_input: missing integer parameter 'rng_offset'"},
      {"split",
       [](Sig &s) {
         s.ins[0].shape = {2, 10};
       },
       "split: input 0 (x) has shape [2, 10], expected [..., 3 * K]"},
      {"split", [](Sig &s) { s.outs.clear(); },
       "split: expected at least 1 output (part), got 0"},
      {"split_grad_input",
       [](Sig &s) {
         s.ins[1].shape = {2, 4};
       },
       "split_grad_input: input 1 (dpart) has shape [2, 4], expected [2, 3]"},
      {"cross_entropy", [](Sig &s) { s.outs[0].shape = {1}; },
       "cross_entropy: output 0 (loss) has shape [1], expected [] (a scalar)"},
      {"cross_entropy",
       [](Sig &s) {
         s.ins[1].shape = {2, 4};
       },
       "cross_entropy: input 1 (labels) has shape [2, 4], expected [2, 3]"},
      {"cross_entropy",
       [](Sig &s) {
         s.ins[0].shape = {2, 3, 0};
       },
       "the vocabulary V must not be empty"},
      {"cross_entropy_grad_input", [](Sig &s) { s.params = KernelParams(); },
       "cross_entropy_grad_input: missing float parameter 'scale'"},
      {"fill", [](Sig &s) { s.params = KernelParams(); },
       "fill: missing float parameter 'value'"},
      {"fill", [](Sig &s) { s.ins.push_back({{4}}); },
       "fill: expected 0 inputs (), got 1"},
      {"grad_norm", [](Sig &s) { s.ins.clear(); },
       "grad_norm: expected at least 1 input (grad), got 0"},
      {"grad_norm", [](Sig &s) { s.outs[0].shape = {1}; },
       "grad_norm: output 0 (norm) has shape [1], expected []"},
      {"adamw", [](Sig &s) { s.params.setFloat("beta1", 1.0); },
       "adamw: parameter 'beta1' is 1, expected 0 <= beta1 < 1"},
      {"adamw", [](Sig &s) { s.params.setFloat("eps", 0.0); },
       "adamw: parameter 'eps' is 0, expected 0 < eps"},
      {"adamw", [](Sig &s) { s.params.setFloat("grad_clip", -1.0); },
       "adamw: parameter 'grad_clip' is -1, expected 0 <= grad_clip"},
      {"adamw", [](Sig &s) { s.ins[1].shape = {1}; },
       "adamw: input 1 (norm) has shape [1], expected [] (a scalar, from "
       "grad_norm)"},
      {"adamw", [](Sig &s) { s.outs[2].shape = {8}; },
       "adamw: output 2 (exp_avg_sq) has shape [8], expected [4, 2]"},
  };
}

INSTANTIATE_TEST_SUITE_P(BadInputs, CheckRefuses,
                         ::testing::ValuesIn(badCases()),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return info.param.kernel + "_" +
                                  std::to_string(info.index);
                         });

} // namespace
} // namespace braid
