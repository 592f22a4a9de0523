// The attributes fwd-legalize writes, malformed by hand: a `fwd.numerics` naming no shim was read as
// Dequant (the report said Dequant, the plan judged by the quantize stages); a `fwd.refused` that is
// not a non-empty string was lowered as if the stage were not marked. Each is now a located error.
// RUN: not fwdshim-opt %s --split-input-file -p fwd-lower-numba 2>&1 | filecheck %s
// RUN: not fwdshim-opt %s --split-input-file -t 'numba{plan_only=true}' 2>&1 | filecheck %s
// RUN: not fwdshim-opt %s --split-input-file --explain 2>&1 | filecheck %s --check-prefix=EXPLAIN

// CHECK: malformed_marks.mlir:[[# @LINE + 2]]:1: error: fwd.numerics names the shim "cuda-forward:TwoPass", not a contract naming one of "cuda-forward:Dequant", "cuda-forward:Int8Act", "cuda-forward:TwoPassInt8" (as fwd-legalize writes it)
// EXPLAIN: malformed_marks.mlir:[[# @LINE + 1]]:1: error: fwd.numerics names the shim "cuda-forward:TwoPass"
builtin.module attributes {fwd.numerics = {shim = "cuda-forward:TwoPass"}} {
  func.func @typo(%x: tensor<64xf32>) -> tensor<64xf32> {
    %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
    func.return %s : tensor<64xf32>
  }
}

// -----

// CHECK: malformed_marks.mlir:[[# @LINE + 2]]:1: error: fwd.numerics is "int8-act", not a contract naming one of
// EXPLAIN: malformed_marks.mlir:[[# @LINE + 1]]:1: error: fwd.numerics is "int8-act", not a contract naming one of
builtin.module attributes {fwd.numerics = "int8-act"} {
  func.func @spelling(%x: tensor<64xf32>) -> tensor<64xf32> {
    %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
    func.return %s : tensor<64xf32>
  }
}

// -----

func.func @refused_int(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: malformed_marks.mlir:[[# @LINE + 1]]:3: error: a stage marked `fwd.refused = 3 : i64` is refused (fwd-legalize{mode=mark} marks one with its reason, a non-empty string)
  %s = fwd.silu %x {fwd.refused = 3} : tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

func.func @refused_empty(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: malformed_marks.mlir:[[# @LINE + 1]]:3: error: a stage marked `fwd.refused = ""` is refused
  %s = fwd.silu %x {fwd.refused = ""} : tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
