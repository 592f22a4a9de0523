// forward-shim splits a fused op of a Decompose class met in the input before it quantizes and fuses:
// the parts are quantized and fused as any stage (issue 10: split after quantization, the Q8_0 matmuls
// of a split merged_gate_up read f32 under int8-act, against the module's contract).
// RUN: fwdshim-opt %s --split-input-file -p 'forward-shim{numerics=int8-act}' | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %s --split-input-file -p 'forward-shim{numerics=dequant}' | filecheck %s --check-prefix=DEQ

// INT8-LABEL: func.func @merged_gate_up(
// INT8:         %[[Q:.*]] = fwd.quantize %x one_word
// INT8:         fwd.matmul %[[Q]], %wg {fwd.decomposed_from = "merged_gate_up"} : !fwd.qact<64, one_word>
// INT8-NEXT:    fwd.matmul %[[Q]], %wu {fwd.decomposed_from = "merged_gate_up"} : !fwd.qact<64, one_word>
// INT8-NOT:     fwd.matmul %x
// Negative: under dequant no activation is quantized; the matmuls read %x.
// DEQ-LABEL:  func.func @merged_gate_up(
// DEQ-NOT:      fwd.quantize
// DEQ:          fwd.matmul %x, %wg {fwd.decomposed_from = "merged_gate_up"} : tensor<64xf32>
// DEQ-NEXT:     fwd.matmul %x, %wu {fwd.decomposed_from = "merged_gate_up"} : tensor<64xf32>
func.func @merged_gate_up(%x: tensor<64xf32>) -> tensor<32xf32> {
  %wg = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<32x64, q8_0>
  %wu = fwd.weight "blk.0.ffn_up.weight" : !fwd.weights<32x64, q8_0>
  %f:2 = fwd.fused merged_gate_up covers [0, 1] ins(%x, %wg, %wu) : (tensor<64xf32>, !fwd.weights<32x64, q8_0>, !fwd.weights<32x64, q8_0>) -> (tensor<32xf32>, tensor<32xf32>) {
  ^bb0(%x_: tensor<64xf32>, %wg_: !fwd.weights<32x64, q8_0>, %wu_: !fwd.weights<32x64, q8_0>):
    %g = fwd.matmul %x_, %wg_ : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
    %u = fwd.matmul %x_, %wu_ : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
    fwd.yield %g, %u : tensor<32xf32>, tensor<32xf32>
  }
  %p = fwd.elementwise mul %f#0, %f#1 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %p : tensor<32xf32>
}

// -----

// Sibling: a split glu_act_mul's parts are the forward's own chain (one kernel), whose result the
// Q8_0 projection reads quantized under int8-act (f32 under dequant).
// INT8-LABEL: func.func @glu_then_projection(
// INT8:         fwd.fused elementwise_chains
// INT8:         fwd.silu
// INT8:         fwd.elementwise mul
// INT8:         fwd.quantize
// INT8:         fwd.matmul %{{.*}}, %wd : !fwd.qact<64, one_word>
// DEQ-LABEL:  func.func @glu_then_projection(
// DEQ:          fwd.fused elementwise_chains
// DEQ-NOT:      fwd.quantize
// DEQ:          fwd.matmul %{{.*}}, %wd : tensor<64xf32>
func.func @glu_then_projection(%g: tensor<64xf32>, %u: tensor<64xf32>) -> tensor<32xf32> {
  %f = fwd.fused glu_act_mul covers [0, 1] ins(%g, %u) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%g_: tensor<64xf32>, %u_: tensor<64xf32>):
    %a = fwd.silu %g_ : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise mul %a, %u_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  %wd = fwd.weight "blk.0.ffn_down.weight" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %f, %wd : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
