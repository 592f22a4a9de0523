// --allow-unregistered-dialect admits ops, types and attributes of dialects nobody registered, not
// unknown ones of a registered dialect (mlir-opt's rule): those are errors at their names.
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --allow-unregistered-dialect | filecheck %s

func.func @op(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.swish %x : tensor<64xf32> -> tensor<64xf32>
  // CHECK: unregistered.mlir:[[# @LINE - 1]]:8
  // CHECK: Operation fwd.swish is not registered (the `fwd` dialect is registered: --allow-unregistered-dialect admits ops of unregistered dialects only)
  func.return %y : tensor<64xf32>
}

// -----

func.func @generic(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = "fwd.swish"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  // CHECK: unregistered.mlir:[[# @LINE - 1]]:8
  // CHECK: Operation fwd.swish is not registered (the `fwd` dialect is registered
  func.return %y : tensor<64xf32>
}

// -----

func.func @type(%x: tensor<64xf32>) -> tensor<64xf32> {
  %w = fwd.weight "w" : !fwd.weight<64x64, q8_0>
  // CHECK: unregistered.mlir:[[# @LINE - 1]]:25
  // CHECK: 'fwd.weight' is not registered (the `fwd` dialect is registered: --allow-unregistered-dialect admits types of unregistered dialects only)
  func.return %x : tensor<64xf32>
}

// -----

func.func @attribute(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.silu %x {k = #fwd.ggml_type<q8_0>} : tensor<64xf32> -> tensor<64xf32>
  // CHECK: unregistered.mlir:[[# @LINE - 1]]:25
  // CHECK: 'fwd.ggml_type' is not registered (the `fwd` dialect is registered: --allow-unregistered-dialect admits attributes of unregistered dialects only)
  func.return %y : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @other_dialects
// CHECK-NEXT: %y = "mine.op"(%x) {k = #mine.attr<1>} : (tensor<64xf32>) -> !mine.type<2>
func.func @other_dialects(%x: tensor<64xf32>) -> !mine.type<2> {
  %y = "mine.op"(%x) {k = #mine.attr<1>} : (tensor<64xf32>) -> !mine.type<2>
  func.return %y : !mine.type<2>
}
