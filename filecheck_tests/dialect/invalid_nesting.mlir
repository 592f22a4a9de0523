// Nesting past 48 levels of operations, attributes and types: an error at the token that goes one
// level too deep (xDSL's recursive parser hit Python's recursion limit: "internal error").
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --allow-unregistered-dialect | filecheck %s

"x.op"() {a = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]} : () -> ()
// CHECK: invalid_nesting.mlir:[[# @LINE - 1]]:62
// CHECK: nesting too deep: more than 48 levels of operations, attributes and types

// -----

%t = "x.op"() : () -> tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<tuple<i32>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>
// CHECK: invalid_nesting.mlir:[[# @LINE - 1]]:305
// CHECK: nesting too deep: more than 48 levels of operations, attributes and types

// -----

// A decode step's depth (a module, a function, fused ops two deep, their types) is far inside it.
// CHECK: func.func @f
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %r = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.fused elementwise_chains covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
    ^bb1(%b: tensor<64xf32>):
      %t = fwd.silu %b : tensor<64xf32> -> tensor<64xf32>
      fwd.yield %t : tensor<64xf32>
    }
    fwd.yield %s : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
