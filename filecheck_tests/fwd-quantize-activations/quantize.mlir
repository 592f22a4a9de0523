// Activation quantization: placed before operand 0 of each Q8_0 matmul and MoE (one fwd.quantize per
// value and format, shared by its consumers), then folded into the producer's epilogue under int8-act
// (norm, add+norm, attention); a separate two_words stage under two-pass-int8; nothing under dequant.
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-quantize-activations{numerics=int8-act},fwd-fuse{numerics=int8-act}' | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-quantize-activations{numerics=two-pass-int8},fwd-fuse{numerics=two-pass-int8}' | filecheck %s --check-prefix=TWO
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-quantize-activations{numerics=dequant},fwd-fuse{numerics=dequant}' | filecheck %s --check-prefix=DEQ

func.func @norm_epilogue(%x: tensor<576xf32>) -> (tensor<576xf32>, tensor<192xf32>) {
  %nw = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %wq = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %wk = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %n, %nw : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %q = fwd.matmul %h, %wq : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %k = fwd.matmul %h, %wk : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  func.return %q, %k : tensor<576xf32>, tensor<192xf32>
}

// INT8-LABEL: func.func @norm_epilogue
// INT8:         %[[HQ:.*]] = fwd.fused norm_quant covers [0, 1, 2] ins(%{{.*}}, %{{.*}}) : (tensor<576xf32>, tensor<576xf32>) -> !fwd.qact<576, one_word> {
// INT8-NEXT:    ^
// INT8-NEXT:      %[[H:.*]] = fwd.fused norm_weight covers [0, 1]
// INT8:           %[[Q1:.*]] = fwd.quantize %[[H]] one_word : tensor<576xf32> -> !fwd.qact<576, one_word>
// INT8-NEXT:      fwd.yield %[[Q1]] : !fwd.qact<576, one_word>
// INT8-NEXT:    }
// INT8-NEXT:    fwd.matmul %[[HQ]], %{{.*}} : !fwd.qact<576, one_word>, !fwd.weights<576x576, q8_0>
// INT8-NEXT:    fwd.matmul %[[HQ]], %{{.*}} : !fwd.qact<576, one_word>, !fwd.weights<192x576, q8_0>
// INT8-NOT:     fwd.quantize

// TWO-LABEL: func.func @norm_epilogue
// TWO:         %[[H:.*]] = fwd.fused norm_weight covers [0, 1]
// TWO:         %[[HQ:.*]] = fwd.quantize %[[H]] two_words : tensor<576xf32> -> !fwd.qact<576, two_words>
// TWO-NEXT:    fwd.matmul %[[HQ]], %{{.*}} : !fwd.qact<576, two_words>
// TWO-NEXT:    fwd.matmul %[[HQ]], %{{.*}} : !fwd.qact<576, two_words>
// TWO-NOT:     norm_quant

// DEQ-LABEL: func.func @norm_epilogue
// DEQ-NOT:     fwd.quantize
// DEQ-NOT:     qact
// DEQ:         fwd.fused norm_weight
// DEQ-NOT:     fwd.quantize
// DEQ-NOT:     qact

// -----

func.func @add_norm_epilogue(%x: tensor<576xf32>, %o: tensor<576xf32>) -> (tensor<576xf32>, tensor<1536xf32>) {
  %wg = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<1536x576, q8_0>
  %s = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %g = fwd.matmul %n, %wg : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  func.return %s, %g : tensor<576xf32>, tensor<1536xf32>
}

// INT8-LABEL: func.func @add_norm_epilogue
// INT8-NEXT:    fwd.weight
// INT8-NEXT:    %[[S:.*]], %[[NQ:.*]] = fwd.fused add_norm_quant covers [0, 1, 2] ins(%{{.*}}, %{{.*}}) : (tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, !fwd.qact<576, one_word>) {
// INT8-NEXT:    ^
// INT8-NEXT:      %[[S1:.*]], %[[N1:.*]] = fwd.fused add_norm covers [0, 1]
// INT8:           %[[Q1:.*]] = fwd.quantize %[[N1]] one_word
// INT8-NEXT:      fwd.yield %[[S1]], %[[Q1]]
// INT8-NEXT:    }
// INT8-NEXT:    %[[G:.*]] = fwd.matmul %[[NQ]]
// INT8-NEXT:    func.return %[[S]], %[[G]]

// TWO-LABEL: func.func @add_norm_epilogue
// TWO:         %[[S:.*]], %[[N:.*]] = fwd.fused add_norm covers [0, 1]
// TWO:         %[[NQ:.*]] = fwd.quantize %[[N]] two_words
// TWO-NEXT:    fwd.matmul %[[NQ]]

// DEQ-LABEL: func.func @add_norm_epilogue
// DEQ:         %[[S:.*]], %[[N:.*]] = fwd.fused add_norm covers [0, 1]
// DEQ:         fwd.matmul %[[N]], %{{.*}} : tensor<576xf32>
// DEQ-NOT:     fwd.quantize

// -----

func.func @attention_epilogue(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<15x192xf32>, %vc: tensor<15x192xf32>) -> tensor<576xf32> {
  %wo = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<576x576, q8_0>
  %att = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 16 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<15x192xf32>, tensor<15x192xf32> -> tensor<576xf32>
  %o = fwd.matmul %att, %wo : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  func.return %o : tensor<576xf32>
}

// INT8-LABEL: func.func @attention_epilogue
// INT8:         %[[AQ:.*]] = fwd.fused attn_output_quant covers [0, 1] ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : {{.*}} -> !fwd.qact<576, one_word> {
// INT8-NEXT:    ^
// INT8-NEXT:      %[[A:.*]] = fwd.attention
// INT8-NEXT:      %[[Q1:.*]] = fwd.quantize %[[A]] one_word
// INT8-NEXT:      fwd.yield %[[Q1]]
// INT8-NEXT:    }
// INT8-NEXT:    fwd.matmul %[[AQ]]

// TWO-LABEL: func.func @attention_epilogue
// TWO:         %[[A:.*]] = fwd.attention
// TWO-NEXT:    %[[AQ:.*]] = fwd.quantize %[[A]] two_words
// TWO-NEXT:    fwd.matmul %[[AQ]]

// DEQ-LABEL: func.func @attention_epilogue
// DEQ:         %[[A:.*]] = fwd.attention
// DEQ-NEXT:    fwd.matmul %[[A]], %{{.*}} : tensor<576xf32>

// -----

// Negative: heads of 48 values are not whole 32-value blocks: attn_output_quant is refused (remark),
// the quantize stays its own stage. A chain's result (the SwiGLU the down projection reads) has no
// epilogue rule. A matmul over f32 weights reads no quantized activation.
func.func @no_epilogue(%q: tensor<192xf32>, %k: tensor<48xf32>, %v: tensor<48xf32>, %kc: tensor<15x48xf32>, %vc: tensor<15x48xf32>, %g: tensor<64xf32>, %u: tensor<64xf32>) -> (tensor<192xf32>, tensor<192xf32>, tensor<64xf32>) {
  %wo = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<192x192, q8_0>
  %wd = fwd.weight "blk.0.ffn_down.weight" : !fwd.weights<192x64, q8_0>
  %wf = fwd.weight "blk.0.f32.weight" : tensor<64x64xf32>
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 1 hd 48 vd 48 l 16 rows 1 : tensor<192xf32>, tensor<48xf32>, tensor<48xf32>, tensor<15x48xf32>, tensor<15x48xf32> -> tensor<192xf32>
  %o = fwd.matmul %att, %wo : tensor<192xf32>, !fwd.weights<192x192, q8_0> -> tensor<192xf32>
  %sg = fwd.silu %g : tensor<64xf32> -> tensor<64xf32>
  %gu = fwd.elementwise mul %sg, %u : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %d = fwd.matmul %gu, %wd : tensor<64xf32>, !fwd.weights<192x64, q8_0> -> tensor<192xf32>
  %f = fwd.matmul %gu, %wf : tensor<64xf32>, tensor<64x64xf32> -> tensor<64xf32>
  func.return %o, %d, %f : tensor<192xf32>, tensor<192xf32>, tensor<64xf32>
}

// INT8-LABEL: func.func @no_epilogue
// INT8:         %[[A:.*]] = fwd.attention {{.*}} {fwd.remark = "attn_output_quant: the forward's attention quantizes its result only where each head's values are whole 32-value blocks"}
// INT8-NEXT:    %[[AQ:.*]] = fwd.quantize %[[A]] one_word
// INT8-NEXT:    fwd.matmul %[[AQ]]
// INT8-NEXT:    %[[GU:.*]] = fwd.fused elementwise_chains
// INT8:         }
// INT8-NEXT:    %[[GQ:.*]] = fwd.quantize %[[GU]] one_word
// INT8-NEXT:    fwd.matmul %[[GQ]], %{{.*}} : !fwd.qact<64, one_word>
// INT8-NEXT:    fwd.matmul %[[GU]], %{{.*}} : tensor<64xf32>, tensor<64x64xf32>
