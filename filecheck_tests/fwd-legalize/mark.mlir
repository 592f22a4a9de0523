// RUN: fwdshim-opt %s --verify-diagnostics -p fwd-legalize | filecheck %s --check-prefix=STRICT
// RUN: fwdshim-opt %s -p 'fwd-legalize{mode=mark}' | filecheck %s --check-prefix=MARK
// RUN: fwdshim-opt %s -p 'fwd-legalize{mode=mark}' | fwdshim-opt -p 'fwd-legalize{mode=mark}' | filecheck %s --check-prefix=MARK

// One module, two modes. strict: every refused op is an error at its location, all in one run (the pass fails).
// mark: each refused op keeps its place with `fwd.refused = "<reason>"`; the pass succeeds and the module carries
// the contract. Marking a marked module again changes nothing (the third run).

// STRICT: mark.mlir:[[# @LINE + 17]]:3: error: a soft-capped attention (`softcap C`) — its kernel caps no score
// STRICT-NEXT: mark.mlir:[[# @LINE + 19]]:3: error: this lane has no kernel for the op
// STRICT-NEXT: mark.mlir:[[# @LINE + 19]]:3: error: the forward links no ReLU
// STRICT-NEXT: mark.mlir:[[# @LINE + 25]]:5: error: the forward reads no view into another buffer
// STRICT-NOT: error

// MARK: builtin.module attributes {fwd.numerics = {shim = "cuda-forward:Dequant"
// MARK-LABEL: func.func @layer(
// MARK: %att = fwd.attention {{.*}} softcap 3.000000e+01 {fwd.refused = "a soft-capped attention (`softcap C`) \E2\80\94 its kernel caps no score"}
// MARK-NEXT: %w = fwd.weight
// MARK-NEXT: %o = fwd.matmul %att, %w : 
// MARK-NEXT: %r = fwd.relu %o {fwd.refused = "this lane has no kernel for the op (fwd.relu)"}
// MARK-NEXT: %rs = fwd.fused relu_sqr covers [3] ins(%r) {fwd.refused = "the forward links no ReLU"}
// MARK: %vw = fwd.view %rs {fwd.decomposed_from = "glu_act_mul", fwd.refused = "the forward reads no view into another buffer"}
// MARK-NEXT: %m = fwd.elementwise mul %vw, %o {fwd.decomposed_from = "glu_act_mul"}
// MARK-NEXT: func.return %m
func.func @layer(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) -> tensor<32xf32> {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 1 softcap 3.0e+01 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  %w = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<32x128, q8_0>
  %o = fwd.matmul %att, %w : tensor<128xf32>, !fwd.weights<32x128, q8_0> -> tensor<32xf32>
  %r = fwd.relu %o : (tensor<32xf32>) -> tensor<32xf32>
  %rs = fwd.fused relu_sqr covers [3] ins(%r) : (tensor<32xf32>) -> tensor<32xf32> {
  ^bb0(%r_: tensor<32xf32>):
    %s = fwd.silu %r_ : tensor<32xf32> -> tensor<32xf32>
    fwd.yield %s : tensor<32xf32>
  }
  %g = fwd.fused glu_act_mul covers [4, 5] ins(%rs, %o) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32> {
  ^bb0(%rs_: tensor<32xf32>, %o_: tensor<32xf32>):
    %vw = fwd.view %rs_ : tensor<32xf32> -> tensor<32xf32>
    %m = fwd.elementwise mul %vw, %o_ : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
    fwd.yield %m : tensor<32xf32>
  }
  func.return %g : tensor<32xf32>
}
