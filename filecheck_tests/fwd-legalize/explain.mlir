// The legality report: after the IR, one `//` row per stage (stage, op, location, verdict, class or reason) and a
// row per fusion remark. `--explain` prints it after the pipeline; `fwd-legalize{explain=true}` when the pass runs.
// RUN: fwdshim-opt %s -p 'fwd-fuse,fwd-legalize{mode=mark}' --explain | filecheck %s
// RUN: fwdshim-opt %s -p 'fwd-legalize{mode=mark explain=true}' | filecheck %s --check-prefix=OPT
// RUN: fwdshim-opt %s --explain | filecheck %s --check-prefix=NOPASS

// The table follows the module.
// CHECK:      {{^}}}
// CHECK-NEXT: {{^$}}
// CHECK-NEXT: // legality report: cuda-forward:Dequant
// CHECK-NEXT: // stage: the stage number after fusion; covers [..]: a fused op's stages, numbered before fusion
// CHECK-NEXT: // stage  op {{ +}}location {{ +}}verdict {{ +}}class or reason
// CHECK-NEXT: // 0      fwd.fused {{ +}}{{.*}}explain.mlir:43:3  native kernel  norm_weight  covers [0, 1]
// CHECK-NEXT: // 1      fwd.matmul {{ +}}{{.*}}explain.mlir:45:3  native kernel  primitive
// CHECK-NEXT: // 2      fwd.relu {{ +}}{{.*}}explain.mlir:46:3  refused {{ +}}this lane has no kernel for the op
// CHECK-NEXT: // 2      fwd.relu {{ +}}{{.*}}explain.mlir:46:3  remark {{ +}}relu_sqr: the forward links no ReLU
// CHECK-NEXT: // 3      fwd.elementwise {{.*}}explain.mlir:47:3  native kernel  primitive
// CHECK-NEXT: // 4      fwd.silu {{ +}}{{.*}}explain.mlir:50:5  decomposed {{ +}}part of glu_act_mul
// CHECK-NEXT: // 5      fwd.elementwise {{.*}}explain.mlir:51:5  decomposed {{ +}}part of glu_act_mul
// CHECK-NEXT: // fusion coverage: fused ops of each rule's class in the module (nested ones, and any written in the input, included)

// The pass option prints the same table, before the IR.
// OPT:      // legality report: cuda-forward:Dequant
// OPT:      // 3      fwd.relu {{ +}}{{.*}}explain.mlir:46:3  refused {{ +}}this lane has no kernel for the op
// OPT:      // 5      fwd.silu {{ +}}{{.*}}explain.mlir:50:5  decomposed {{ +}}part of glu_act_mul
// OPT:      builtin.module attributes {fwd.numerics

// Without a pass, the report judges the IR as it is: the Decompose class and each of its parts.
// NOPASS:      // legality report: cuda-forward:Dequant
// NOPASS-NEXT: // stage: the stage number after fusion; covers [..]: a fused op's stages, numbered before fusion
// NOPASS-NEXT: // stage  op
// NOPASS-NEXT: // 0      fwd.rms_norm {{ +}}{{.*}}explain.mlir:43:3  native kernel  primitive
// NOPASS-NEXT: // 1      fwd.elementwise {{.*}}explain.mlir:44:3  native kernel  primitive
// NOPASS-NEXT: // 2      fwd.matmul
// NOPASS-NEXT: // 3      fwd.relu {{.*}} refused
// NOPASS-NEXT: // 4      fwd.elementwise
// NOPASS-NEXT: // 5      fwd.fused {{ +}}{{.*}}explain.mlir:48:3  decomposed {{ +}}glu_act_mul  covers [6, 7]
// NOPASS-NEXT: // 5      fwd.silu {{ +}}{{.*}}explain.mlir:50:5  decomposed {{ +}}part of glu_act_mul
// NOPASS-NEXT: // 5      fwd.elementwise {{.*}}explain.mlir:51:5  decomposed {{ +}}part of glu_act_mul
func.func @report(%x: tensor<64xf32>, %u: tensor<32xf32>) -> tensor<32xf32> {
  %w = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<32x64, q8_0>
  %nw = fwd.weight "blk.0.ffn_norm.weight" : tensor<64xf32>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  %h = fwd.elementwise mul %n, %nw : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %g = fwd.matmul %h, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  %r = fwd.relu %g : (tensor<32xf32>) -> tensor<32xf32>
  %s = fwd.elementwise mul %r, %r : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %f = fwd.fused glu_act_mul covers [6, 7] ins(%s, %u) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32> {
  ^bb0(%a: tensor<32xf32>, %b: tensor<32xf32>):
    %t = fwd.silu %a : tensor<32xf32> -> tensor<32xf32>
    %m = fwd.elementwise mul %t, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
    fwd.yield %m : tensor<32xf32>
  }
  func.return %f : tensor<32xf32>
}

// The fusion coverage closes the table (its first line is checked after the rows above): fwd-fuse's
// glu_act_mul fired too, but legalization split it, so only the fused ops left are counted.
// CHECK-NEXT: // norm_weight  1
// CHECK-NEXT: // did not fire: add_norm, add_norm_quant, norm_quant, attn_output_quant, glu_act_mul, merged_gate_up, qk_norm_rope, relu_sqr, elementwise_regions, elementwise_chains
// Then each norm, elementwise op, silu, relu or quantize left as its own stage, with the first rule whose
// match takes it and what stopped that match (here the shim's refusal of relu_sqr's class; the parts
// legalization split from glu_act_mul would chain, but fwd-fuse ran before the split).
// CHECK-NEXT: // left unfused: 4 fusable stage(s) (norm, elementwise op, silu, relu, quantize), and why no rule took each
// CHECK-NEXT: // 2  fwd.relu {{ +}}{{.*}}explain.mlir:46:3  relu_sqr: the forward links no ReLU
// CHECK-NEXT: // 3  fwd.elementwise  {{.*}}explain.mlir:47:3  nothing: fwd-fuse would fuse it (it has not run on this IR, or not since the IR changed)
// CHECK-NEXT: // 4  fwd.silu {{ +}}{{.*}}explain.mlir:50:5  nothing: fwd-fuse would fuse it
// CHECK-NEXT: // 5  fwd.elementwise  {{.*}}explain.mlir:51:5  nothing: fwd-fuse would fuse it
// CHECK-NOT:  //

// A bare boolean option is true, as in mlir-opt:
// RUN: fwdshim-opt %s -p 'fwd-legalize{mode=mark explain}' | filecheck %s --check-prefix=OPT
