// RUN: braid-opt %s -split-input-file -verify-diagnostics --allow-unregistered-dialect

// What the arguments of a stage function are, and whose gradient a result
// is. Every field of a braid.param is required, in its place: a missing one
// is a parse error that names it.

// braid.param: init_std is missing.
// expected-error @+1 {{expected 'init_std'}}
func.func @f(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: checkpoint_transposed is missing.
// expected-error @+1 {{expected ','}}
func.func @f(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false>}) {
  return
}

// -----

// braid.param: a parameter is initialised one of three ways.
// expected-error @+2 {{expected one of [normal, zeros, ones] for how a parameter is initialised, got: uniform}}
// expected-error @+1 {{failed to parse Braid_ParamAttr parameter 'init'}}
func.func @f(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = uniform, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: a normal initialisation needs its std.
// expected-error @+1 {{parameter 'w' has init = normal, so it needs a finite positive init_std, not 0}}
func.func @f(%w: tensor<4x4xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 0.0, weight_decay = true, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: the std of a normal initialisation is positive.
// expected-error @+1 {{parameter 'w' has init = normal, so it needs a finite positive init_std, not -2.000000e-02}}
func.func @f(%w: tensor<4x4xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = -2.0e-02, weight_decay = true, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: zeros and ones take no std.
// expected-error @+1 {{parameter 'b' has init = zeros, which takes no init_std (0), not 2.000000e-02}}
func.func @f(%b: tensor<4xf32> {braid.param = #braid.param<name = "b", init = zeros, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: a parameter has a name.
// expected-error @+1 {{a parameter needs a name}}
func.func @f(%b: tensor<4xf32> {braid.param = #braid.param<name = "", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: a flag is true or false.
// expected-error @+2 {{expected true or false}}
// expected-error @+1 {{failed to parse Braid_ParamAttr parameter 'weight_decay'}}
func.func @f(%b: tensor<4xf32> {braid.param = #braid.param<name = "b", init = ones, init_std = 0.0, weight_decay = 1, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.param: the std takes a float literal.
// expected-error @+3 {{unexpected decimal integer literal for a floating point value}}
// expected-note @+2 {{add a trailing dot to make the literal a float}}
// expected-error @+1 {{failed to parse Braid_ParamAttr parameter 'init_std'}}
func.func @f(%b: tensor<4xf32> {braid.param = #braid.param<name = "b", init = ones, init_std = 0, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// braid.input: an input is tokens, labels or positions.
// expected-error @+2 {{expected ::braid::InputRole to be one of: tokens, labels, positions}}
// expected-error @+1 {{failed to parse Braid_InputRoleAttr parameter 'value'}}
func.func @f(%m: tensor<2x4xi32> {braid.input = #braid.input<mask>}) {
  return
}

// -----

// braid.param is a #braid.param, not a dictionary.
// expected-error @+1 {{'func.func' op 'braid.param' of argument 0 must be a #braid.param<...>, not {init = "ones", name = "w"}}}
func.func @f(%w: tensor<4xf32> {braid.param = {name = "w", init = "ones"}}) {
  return
}

// -----

// braid.input is a #braid.input, not a string.
// expected-error @+1 {{'func.func' op 'braid.input' of argument 1 must be a #braid.input, not "labels"}}
func.func @f(%t: tensor<2x4xi32> {braid.input = #braid.input<tokens>}, %l: tensor<2x4xi32> {braid.input = "labels"}) {
  return
}

// -----

// An argument is a parameter or an input, not both.
// expected-error @+1 {{'func.func' op argument 0 is both a braid.param and a braid.input}}
func.func @f(%w: tensor<4xf32> {braid.input = #braid.input<tokens>, braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) {
  return
}

// -----

// What an argument is belongs on the argument.
// expected-error @+1 {{'func.func' op 'braid.param' belongs on a function argument, not on an op}}
func.func @f() attributes {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>} {
  return
}

// -----

// braid.grad_of names the parameter whose gradient a result is.
// expected-error @+1 {{'func.func' op 'braid.grad_of' of result 1 is "v", but no braid.param argument has that name}}
func.func @f(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> (tensor<f32> {braid.loss}, tensor<4xf32> {braid.grad_of = "v"}) {
  %l = "test.loss"() : () -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// braid.grad_of is a name.
// expected-error @+1 {{'func.func' op 'braid.grad_of' of result 1 must be a parameter's name, not 0 : i64}}
func.func @f(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> (tensor<f32> {braid.loss}, tensor<4xf32> {braid.grad_of = 0}) {
  %l = "test.loss"() : () -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
