// A `fwd` op's property written in the generic form's attribute dictionary is its property, as MLIR
// reads inherent attributes there: `{into = "k_cache"}` on a silu is where it writes, printed back the
// same in both forms. It was a discardable attribute the op did not read (the silu was pure), printed
// as `into "k_cache"` and so a property once parsed again. Given both ways, it is an error.
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK: %y = fwd.silu %x into "k_cache" : tensor<64xf32> -> tensor<64xf32>
// CHECK: %r = fwd.rope %y, %ang hd 32 half 16 rows 1 from 3 {fwd.note = "kept"} : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32>
// GENERIC: %y = "fwd.silu"(%x) <{into = "k_cache"}> : (tensor<64xf32>) -> tensor<64xf32>
// GENERIC: %r = "fwd.rope"(%y, %ang) <{hd = 32 : i64, half = 16 : i64, rows = 1 : i64, from = 3 : i64}> {fwd.note = "kept"}
"func.func"() <{sym_name = "f", function_type = (tensor<64xf32>, tensor<2x16xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>, %ang: tensor<2x16xf32>):
  %y = "fwd.silu"(%x) {into = "k_cache"} : (tensor<64xf32>) -> tensor<64xf32>
  %r = "fwd.rope"(%y, %ang) <{hd = 32 : i64, half = 16 : i64, rows = 1 : i64}> {from = 3 : i64, fwd.note = "kept"} : (tensor<64xf32>, tensor<2x16xf32>) -> tensor<64xf32>
  "func.return"(%r) : (tensor<64xf32>) -> ()
}) : () -> ()

// -----

// CHECK: generic_inherent.mlir:[[# @LINE + 4]]:3
// CHECK: fwd.silu is given `into` both as a property and as an attribute
"func.func"() <{sym_name = "g", function_type = (tensor<64xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>):
  %y = "fwd.silu"(%x) <{into = "v_cache"}> {into = "k_cache"} : (tensor<64xf32>) -> tensor<64xf32>
  "func.return"(%y) : (tensor<64xf32>) -> ()
}) : () -> ()
