// The Mixtral example through forward-shim under each numerics: the MoE is one stage (no rule splits
// it) reading the quantized activation as operand 0 under int8-act / two-pass-int8.
// RUN: fwdshim-opt %S/../../examples/mixtral_layer.mlir -p 'forward-shim{numerics=dequant}' | filecheck %s --check-prefix=DEQ
// RUN: fwdshim-opt %S/../../examples/mixtral_layer.mlir -p 'forward-shim{numerics=int8-act}' | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %S/../../examples/mixtral_layer.mlir -p 'forward-shim{numerics=two-pass-int8}' | filecheck %s --check-prefix=TWO

// DEQ-LABEL: func.func @decode_step
// DEQ:         %[[H0:.*]] = fwd.fused norm_weight covers [0, 1]
// DEQ:         fwd.attention
// DEQ:         %[[X1:.*]], %[[H1:.*]] = fwd.fused add_norm covers [9, 10, 11]
// DEQ:         %[[M:.*]] = fwd.moe %[[H1]], {{.*}} : tensor<576xf32>, !fwd.weights<8x576, q8_0>
// DEQ-NEXT:    %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[M]]
// DEQ-NEXT:    func.return %[[OUT]]
// DEQ-NOT:     fwd.quantize

// INT8-LABEL: func.func @decode_step
// INT8:         fwd.fused norm_quant covers [0, 1, 2]
// INT8:         fwd.fused attn_output_quant covers [8, 9]
// INT8:         %[[X1:.*]], %[[H1Q:.*]] = fwd.fused add_norm_quant covers [11, 12, 13, 14]
// INT8:         %[[M:.*]] = fwd.moe %[[H1Q]], {{.*}} : !fwd.qact<576, one_word>, !fwd.weights<8x576, q8_0>
// INT8-NEXT:    %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[M]]
// INT8-NEXT:    func.return %[[OUT]]

// TWO-LABEL: func.func @decode_step
// TWO:         %[[X1:.*]], %[[H1:.*]] = fwd.fused add_norm covers [11, 12, 13]
// TWO:         %[[H1Q:.*]] = fwd.quantize %[[H1]] two_words
// TWO-NEXT:    %[[M:.*]] = fwd.moe %[[H1Q]], {{.*}} : !fwd.qact<576, two_words>
// TWO-NEXT:    %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[M]]
// TWO-NOT:     _quant
