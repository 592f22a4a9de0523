// `fwd.fused` and `fwd.yield`: a fused op with its parts, a fused op nested in another (the seed's
// `leaves`), `access`/`into` on a fused op, no operands and no results; custom form, generic form and back.
// RUN: fwdshim-opt %s | filecheck %s
// RUN: fwdshim-opt %s | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt --print-op-generic | filecheck %s --check-prefix=GENERIC
// Stock xdsl-opt sees the dialect through the `xdsl.universe` entry point:
// RUN: xdsl-opt %s | filecheck %s

func.func @add_norm(%y: tensor<576xf32>, %x: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %f:2 = fwd.fused add_norm covers [3, 4] ins(%y, %x) : (tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
  }
  func.return %f#0, %f#1 : tensor<576xf32>, tensor<576xf32>
}

// CHECK-LABEL: func.func @add_norm(%y: tensor<576xf32>, %x: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT: %f, %f_1 = fwd.fused add_norm covers [3, 4] ins(%y, %x) : (tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT: ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>):
// CHECK-NEXT: %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n = fwd.rms_norm %s eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %f, %f_1 : tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "add_norm", function_type = (tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>)}> ({
// GENERIC-NEXT: ^bb0(%y: tensor<576xf32>, %x: tensor<576xf32>):
// GENERIC-NEXT: %f, %f_1 = "fwd.fused"(%y, %x) <{class = "add_norm", covers = array<i64: 3, 4>}> ({
// GENERIC-NEXT: ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>):
// GENERIC-NEXT: %s = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<add>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n = "fwd.rms_norm"(%s) <{eps = 1.000000e-05 : f32, operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "fwd.yield"(%s, %n) : (tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : (tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>)
// GENERIC-NEXT: "func.return"(%f, %f_1) : (tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @nested(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
  %f:2 = fwd.fused add_norm covers [0, 1, 2] ins(%x, %y, %w) access [#fwd.access<whole>, #fwd.access<whole>, #fwd.access<whole>] into "residual" : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.fused norm_weight covers [1, 2] ins(%s, %c) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
    ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
      %n1 = fwd.rms_norm %s1 eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
      %n2 = fwd.elementwise mul %n1, %c1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
      fwd.yield %n2 : tensor<576xf32>
    }
    fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
  }
  func.return %f#1 : tensor<576xf32>
}

// CHECK-LABEL: func.func @nested(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
// CHECK-NEXT: %f, %f_1 = fwd.fused add_norm covers [0, 1, 2] ins(%x, %y, %w) access [#fwd.access<whole>, #fwd.access<whole>, #fwd.access<whole>] into "residual" : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT: ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
// CHECK-NEXT: %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n = fwd.fused norm_weight covers [1, 2] ins(%s, %c) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
// CHECK-NEXT: ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
// CHECK-NEXT: %n1 = fwd.rms_norm %s1 eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n2 = fwd.elementwise mul %n1, %c1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: fwd.yield %n2 : tensor<576xf32>
// CHECK-NEXT: }
// CHECK-NEXT: fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %f_1 : tensor<576xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "nested", function_type = (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>):
// GENERIC-NEXT: %f, %f_1 = "fwd.fused"(%x, %y, %w) <{class = "add_norm", covers = array<i64: 0, 1, 2>, access = [#fwd.access<whole>, #fwd.access<whole>, #fwd.access<whole>], into = "residual"}> ({
// GENERIC-NEXT: ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
// GENERIC-NEXT: %s = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<add>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n = "fwd.fused"(%s, %c) <{class = "norm_weight", covers = array<i64: 1, 2>}> ({
// GENERIC-NEXT: ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
// GENERIC-NEXT: %n1 = "fwd.rms_norm"(%s1) <{eps = 1.000000e-05 : f32, operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n2 = "fwd.elementwise"(%n1, %c1) <{kind = #fwd.elementwise_kind<mul>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "fwd.yield"(%n2) : (tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "fwd.yield"(%s, %n) : (tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>)
// GENERIC-NEXT: "func.return"(%f_1) : (tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @no_ins_no_results() {
  fwd.fused cuda_graphs covers [7] : () -> () {
    %v = fwd.argmax : () -> tensor<1xi32>
    fwd.yield
  }
  func.return
}

// CHECK-LABEL: func.func @no_ins_no_results() {
// CHECK-NEXT: fwd.fused cuda_graphs covers [7] : () -> () {
// CHECK-NEXT: %v = fwd.argmax : () -> tensor<1xi32>
// CHECK-NEXT: fwd.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-NEXT: }
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "no_ins_no_results", function_type = () -> ()}> ({
// GENERIC-NEXT: "fwd.fused"() <{class = "cuda_graphs", covers = array<i64: 7>}> ({
// GENERIC-NEXT: %v = "fwd.argmax"() : () -> tensor<1xi32>
// GENERIC-NEXT: "fwd.yield"() : () -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC-NEXT: }) : () -> ()
