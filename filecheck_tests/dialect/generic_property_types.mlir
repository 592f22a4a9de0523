// A generic form's property of the wrong kind is said in the IR's words: which property of which op,
// what it was given, what it takes (xDSL said `f64 should be of base attribute f32`, naming neither).
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: generic_property_types.mlir:[[# @LINE + 3]]:3: error: fwd.softcap property `cap` is `3.000000e+00 : f64`; it takes an f32 number (`1.0 : f32`)
"func.func"() <{sym_name = "f", function_type = (tensor<64xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>):
  %y = "fwd.softcap"(%x) <{cap = 3.0 : f64}> : (tensor<64xf32>) -> tensor<64xf32>
  "func.return"(%y) : (tensor<64xf32>) -> ()
}) : () -> ()

// -----

// CHECK: generic_property_types.mlir:[[# @LINE + 3]]:3: error: fwd.softcap property `cap` is `"big"`; it takes an f32 number (`1.0 : f32`)
"func.func"() <{sym_name = "f", function_type = (tensor<64xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>):
  %y = "fwd.softcap"(%x) <{cap = "big"}> : (tensor<64xf32>) -> tensor<64xf32>
  "func.return"(%y) : (tensor<64xf32>) -> ()
}) : () -> ()

// -----

// CHECK: generic_property_types.mlir:[[# @LINE + 3]]:3: error: fwd.rms_norm property `eps` is `1 : i64`; it takes an f32 number (`1.0 : f32`)
"func.func"() <{sym_name = "f", function_type = (tensor<64xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>):
  %y = "fwd.rms_norm"(%x) <{eps = 1 : i64, operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<64xf32>) -> tensor<64xf32>
  "func.return"(%y) : (tensor<64xf32>) -> ()
}) : () -> ()
