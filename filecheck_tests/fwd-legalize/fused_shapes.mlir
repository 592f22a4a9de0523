// B07 (beyond the seed): a native fused class whose parts are not the shape its one kernel computes
// (fwdshim.shim.fused_shapes, the lowering's own checks) is refused, after the seed's class checks (F05-F08
// win). The seed's `_ => Ok(())` called a hand-written one a native kernel and fwd-lower-numba failed.
// int8-act numerics, so the producer-quant classes are native too.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=int8-act}' | filecheck %s
// The negative: a well-formed fused op of each class is still a native kernel.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=int8-act}' --explain | filecheck %s --check-prefix=LEGAL

// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: a fused norm_weight of parts its kernel does not compute — fwd.silu, fwd.softmax, where it computes [add] rms_norm [mul by a weight] [quantize]
func.func @norm_weight_silu_softmax(%x: tensor<64xf32>) {
  %f = fwd.fused norm_weight covers [0, 1] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.silu %a : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.softmax %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return
}

// -----

// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: a fused add_norm of parts its kernel does not compute — fwd.elementwise add, fwd.layer_norm, where it computes [add] rms_norm [mul by a weight] [quantize]
func.func @add_norm_layer_norm(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.layer_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: a fused elementwise_regions of parts its kernel does not compute — a fwd.rms_norm, where it computes silus and elementwise ops only
func.func @regions_with_a_norm(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f = fwd.fused elementwise_regions covers [0, 1, 2] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise mul %s, %n : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return
}

// -----

// A seed reason wins: F07 judges an elementwise chain first.
// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: the forward carries a chain's result through each step, as exactly one operand
func.func @chain_with_a_norm(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f = fwd.fused elementwise_chains covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %n : tensor<64xf32>
  }
  func.return
}

// -----

// No results: every value is of one size, and the kernel would write nothing (it was refused as "ops over
// values of different sizes": each part's size was compared with a first result that is not there).
// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: a fused elementwise_chains of parts its kernel does not compute — no results (a bare fwd.yield), where it writes the values it computes
func.func @chain_without_results(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  fwd.fused elementwise_chains covers [0] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> () {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield
  }
  func.return
}

// -----

// The norm classes too (legality called it native, and fwd-lower-numba refused it: an RMS norm that
// neither stores nor quantizes its result).
// CHECK: fused_shapes.mlir:[[# @LINE + 2]]:3: error: a fused norm_weight of parts its kernel does not compute — no results (a bare fwd.yield), where it writes the values it computes
func.func @norm_without_results(%x: tensor<64xf32>) {
  fwd.fused norm_weight covers [0] ins(%x) : (tensor<64xf32>) -> () {
  ^bb0(%x_: tensor<64xf32>):
    %n = fwd.rms_norm %x_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield
  }
  func.return
}

// -----

// LEGAL: // legality report: cuda-forward:Int8Act
// LEGAL: // 0      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 3]]:3  native kernel  norm_weight
func.func @legal_norms(%x: tensor<64xf32>, %r: tensor<64xf32>) {
  %w = fwd.weight "w" : tensor<64xf32>
  %nw = fwd.fused norm_weight covers [0, 1] ins(%x, %w) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x_: tensor<64xf32>, %w_: tensor<64xf32>):
    %n = fwd.rms_norm %x_ : tensor<64xf32> -> tensor<64xf32>
    %y = fwd.elementwise mul %n, %w_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %y : tensor<64xf32>
  }
// LEGAL-NEXT: // 1      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 1]]:3  native kernel  add_norm
  %an:2 = fwd.fused add_norm covers [2, 3] ins(%nw, %r) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
// LEGAL-NEXT: // 2      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 1]]:3  native kernel  norm_quant
  %nq = fwd.fused norm_quant covers [4, 5] ins(%an#1) : (tensor<64xf32>) -> !fwd.qact<64, one_word> {
  ^bb0(%x_: tensor<64xf32>):
    %n = fwd.rms_norm %x_ : tensor<64xf32> -> tensor<64xf32>
    %q = fwd.quantize %n one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
    fwd.yield %q : !fwd.qact<64, one_word>
  }
// LEGAL-NEXT: // 3      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 1]]:3  native kernel  add_norm_quant
  %anq:2 = fwd.fused add_norm_quant covers [6, 7, 8] ins(%an#0, %r) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, !fwd.qact<64, one_word>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s : tensor<64xf32> -> tensor<64xf32>
    %q = fwd.quantize %n one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
    fwd.yield %s, %q : tensor<64xf32>, !fwd.qact<64, one_word>
  }
  func.return
}
// LEGAL-NOT: refused

// -----

// LEGAL: // 0      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 2]]:3  native kernel  elementwise_chains
func.func @legal_elementwise(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %c = fwd.fused elementwise_chains covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %t : tensor<64xf32>
  }
// LEGAL-NEXT: // 1      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 1]]:3  native kernel  elementwise_regions
  %g = fwd.fused elementwise_regions covers [2, 3, 4] ins(%c, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%c_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %c_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise mul %s, %t : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return
}
// LEGAL-NOT: refused

// -----

// LEGAL: // 0      fwd.fused {{ +}}{{.*}}fused_shapes.mlir:[[# @LINE + 2]]:3  native kernel  attn_output_quant
func.func @legal_attn_output_quant(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<3x64xf32>, %vc: tensor<3x64xf32>) {
  %f = fwd.fused attn_output_quant covers [0, 1] ins(%q, %k, %v, %kc, %vc) : (tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<3x64xf32>, tensor<3x64xf32>) -> !fwd.qact<128, one_word> {
  ^bb0(%q_: tensor<128xf32>, %k_: tensor<64xf32>, %v_: tensor<64xf32>, %kc_: tensor<3x64xf32>, %vc_: tensor<3x64xf32>):
    %a = fwd.attention %q_, %k_, %v_, %kc_, %vc_ h 4 kv 2 hd 32 vd 32 l 4 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<3x64xf32>, tensor<3x64xf32> -> tensor<128xf32>
    %aq = fwd.quantize %a one_word : tensor<128xf32> -> !fwd.qact<128, one_word>
    fwd.yield %aq : !fwd.qact<128, one_word>
  }
  func.return
}
// LEGAL-NOT: refused
