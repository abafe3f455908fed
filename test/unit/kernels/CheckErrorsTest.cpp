// Every kernel's check: a valid launch passes; each kind of bad input is
// refused with a message that names the kernel and what is wrong.
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/ValidLaunches.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::Sig;
using test::validLaunches;

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(Check, EveryKernelHasAValidLaunch) {
  const auto launches = validLaunches();
  for (std::string_view name : defaultKernelRegistry().names(Device::kCPU)) {
    auto it = launches.find(std::string(name));
    ASSERT_NE(it, launches.end()) << "no valid launch for " << name;
    absl::Status s = it->second.check();
    EXPECT_TRUE(s.ok()) << s;
  }
}

// Kernels without bf16 operands: the optimizer kernels stay f32
// (docs/gpu-backend.md: they read f32 masters, gradients, moments and
// scalars), the router scores, chooses and balances in f32 (fused or
// not), and
// document_ids and expert parallel's counts (and the hot-expert choice
// from them) have integer operands only.
bool withoutBf16(const std::string &name) {
  return name == "adamw" || name == "multi_adamw" || name == "grad_norm" ||
         name == "step_guard" || name == "document_ids" ||
         name == "cross_entropy_combine" || name.rfind("moe_route", 0) == 0 ||
         name == "moe_expert_counts" || name == "moe_block_counts" ||
         name == "moe_ep_offsets" || name == "moe_hot_experts" ||
         name.rfind("moe_aux_loss", 0) == 0 ||
         name.rfind("moe_z_loss", 0) == 0 || name == "moe_bias_update" ||
         name.rfind("moe_scores", 0) == 0 || name.rfind("moe_topk", 0) == 0 ||
         name == "moe_sort";
}

int countBf16(const Sig &s) {
  int n = 0;
  for (const auto *ops : {&s.ins, &s.outs})
    for (const TensorDesc &d : *ops)
      n += d.dtype == DType::kBF16;
  return n;
}

// Every other kernel has a launch whose activations are bf16; the f32-only
// ones refuse bf16 on every operand, and document_ids has none.
TEST(Check, Bf16StorageWhereThePrecisionTableSays) {
  for (const auto &[name, valid] : validLaunches()) {
    std::optional<Sig> bf16 = test::bf16Launch(valid);
    ASSERT_TRUE(bf16.has_value()) << name;
    const int bf16Operands = countBf16(*bf16);
    if (withoutBf16(name)) {
      EXPECT_EQ(bf16Operands, 0) << name;
      continue;
    }
    const TensorDesc &first = bf16->ins.empty() ? bf16->outs[0] : bf16->ins[0];
    EXPECT_TRUE(first.dtype == DType::kBF16 || name == "cast") << name;
    EXPECT_GT(bf16Operands, 0) << name;
  }
}

// Operands that may be f32 over bf16 inputs: weight gradients accumulate in
// f32 (or bf16), and cast converts.
bool mayBeF32(const std::string &name, bool input, size_t index) {
  if (name == "cast")
    return true;
  if (name == "linear_cross_entropy_with_grad")
    return !input && index == 2;  // dW
  if (name == "linear_cross_entropy_grad")
    return !input && index == 1;  // dW
  return !input && absl::EndsWith(name, "_grad_weight");
}


// In a bf16 launch, one operand turned f32 is refused, naming the kernel and
// the dtypes, unless the catalogue allows both or nothing bf16 is left.
TEST(Check, MixedStorageIsRefused) {
  for (const auto &[name, valid] : validLaunches()) {
    std::optional<Sig> bf16 = test::bf16Launch(valid);
    ASSERT_TRUE(bf16.has_value()) << name;
    for (int side = 0; side < 2; ++side) {
      const auto &ops = side == 0 ? bf16->ins : bf16->outs;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].dtype != DType::kBF16 || mayBeF32(name, side == 0, i))
          continue;
        Sig mixed = *bf16;
        (side == 0 ? mixed.ins : mixed.outs)[i].dtype = DType::kF32;
        if (countBf16(mixed) == 0)
          continue;
        absl::Status s = mixed.check();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
            << name << (side == 0 ? " input " : " output ") << i;
        EXPECT_THAT(std::string(s.message()), StartsWith(name + ": "));
        EXPECT_THAT(std::string(s.message()), HasSubstr("has dtype"));
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
      {"grad_norm", [](Sig &s) { s.outs[0].shape = {2}; },
       "grad_norm: output 0 (norm) has shape [2], expected []"},
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
