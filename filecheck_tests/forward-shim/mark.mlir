// `forward-shim{mode=mark}`: the whole pipeline with its legality step in mark mode, as
// `fwd-quantize-activations,fwd-fuse,fwd-legalize{mode=mark}` written out: each refused op gets
// `fwd.refused = "<reason>"` and the pipeline succeeds; the rest is quantized and fused as in strict mode.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act mode=mark}' | filecheck %s
// RUN: not fwdshim-opt %s -p 'forward-shim{numerics=int8-act}' 2>&1 | filecheck %s --check-prefix=STRICT
// RUN: not fwdshim-opt %s -p 'forward-shim{mode=maybe}' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK: fwd.numerics = {shim = "cuda-forward:Int8Act"
// CHECK: fwd.fused norm_quant
// CHECK: fwd.matmul
// CHECK: fwd.relu %{{.*}} {fwd.refused = "this lane has no kernel for the op (fwd.relu)"}
// STRICT: mark.mlir:[[# @LINE + 6]]:3: error: this lane has no kernel for the op (fwd.relu)
// BAD: fwdshim-opt: error: -p: option `mode` of `forward-shim` takes strict or mark, not `maybe`
func.func @f(%x: tensor<64xf32>, %w: tensor<64xf32>) -> tensor<32xf32> {
  %n = fwd.rms_norm %x weight(%w : tensor<64xf32>) eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  %q = fwd.weight "q" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %n, %q : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  %r = fwd.relu %y : (tensor<32xf32>) -> tensor<32xf32>
  func.return %r : tensor<32xf32>
}
