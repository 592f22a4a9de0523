// The Llama example through the whole lane (forward-shim = quantize activations -> fuse -> legalize)
// under each numerics, with fwdshim-opt and with stock xdsl-opt. 18 stages unfused; 14 after fusion
// under dequant; 22 with the quantize stages, 15 after fusion under int8-act, 18 under two-pass-int8.
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=dequant}' | filecheck %s --check-prefix=DEQ
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=two-pass-int8}' | filecheck %s --check-prefix=TWO
// RUN: xdsl-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' | filecheck %s --check-prefix=INT8

// DEQ:       fwd.numerics = {shim = "cuda-forward:Dequant"
// DEQ-LABEL: func.func @decode_step
// DEQ-SAME:      (%[[X:.*]]: tensor<576xf32>, %[[ANG:.*]]: tensor<2x32xf32>, %[[KC:.*]]: tensor<4095x192xf32>, %[[VC:.*]]: tensor<4095x192xf32>)
// DEQ:         %[[H0:.*]] = fwd.fused norm_weight covers [0, 1] ins(%[[X]], %{{.*}})
// DEQ:         %[[Q:.*]] = fwd.matmul %[[H0]], %{{.*}} : tensor<576xf32>, !fwd.weights<576x576, q8_0>
// DEQ-NEXT:    %[[K:.*]] = fwd.matmul %[[H0]]
// DEQ-NEXT:    %[[V:.*]] = fwd.matmul %[[H0]]
// DEQ-NEXT:    %[[QR:.*]] = fwd.rope %[[Q]], %[[ANG]]
// DEQ-NEXT:    %[[KR:.*]] = fwd.rope %[[K]], %[[ANG]]
// DEQ-NEXT:    %[[ATT:.*]] = fwd.attention %[[QR]], %[[KR]], %[[V]], %[[KC]], %[[VC]]
// DEQ-NEXT:    %[[O:.*]] = fwd.matmul %[[ATT]]
// DEQ-NEXT:    %[[X1:.*]], %[[H1:.*]] = fwd.fused add_norm covers [9, 10, 11] ins(%[[X]], %[[O]], %{{.*}})
// DEQ-NEXT:    ^
// DEQ-NEXT:      fwd.elementwise add
// DEQ-NEXT:      fwd.fused norm_weight covers [10, 11]
// DEQ:         %[[G:.*]] = fwd.matmul %[[H1]]
// DEQ-NEXT:    %[[U:.*]] = fwd.matmul %[[H1]]
// DEQ-NEXT:    %[[GU:.*]] = fwd.fused elementwise_chains covers [14, 15] ins(%[[G]], %[[U]])
// DEQ-NEXT:    ^
// DEQ-NEXT:      fwd.silu
// DEQ-NEXT:      fwd.elementwise mul
// DEQ-NEXT:      fwd.yield
// DEQ-NEXT:    }
// DEQ-NEXT:    %[[D:.*]] = fwd.matmul %[[GU]]
// DEQ-NEXT:    %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[D]]
// DEQ-NEXT:    func.return %[[OUT]], %[[KR]], %[[V]]
// DEQ-NOT:     fwd.quantize
// DEQ-NOT:     qact

// INT8:       fwd.numerics = {shim = "cuda-forward:Int8Act"
// INT8-LABEL: func.func @decode_step
// INT8:         %[[H0Q:.*]] = fwd.fused norm_quant covers [0, 1, 2] {{.*}} -> !fwd.qact<576, one_word> {
// INT8:         %[[Q:.*]] = fwd.matmul %[[H0Q]], %{{.*}} : !fwd.qact<576, one_word>
// INT8-NEXT:    %[[K:.*]] = fwd.matmul %[[H0Q]]
// INT8-NEXT:    %[[V:.*]] = fwd.matmul %[[H0Q]]
// INT8-NEXT:    %[[QR:.*]] = fwd.rope %[[Q]]
// INT8-NEXT:    %[[KR:.*]] = fwd.rope %[[K]]
// INT8-NEXT:    %[[AQ:.*]] = fwd.fused attn_output_quant covers [8, 9] ins(%[[QR]], %[[KR]], %[[V]], %{{.*}}, %{{.*}}) {{.*}} -> !fwd.qact<576, one_word> {
// INT8:         %[[O:.*]] = fwd.matmul %[[AQ]]
// INT8-NEXT:    %[[X1:.*]], %[[H1Q:.*]] = fwd.fused add_norm_quant covers [11, 12, 13, 14] ins(%{{.*}}, %[[O]], %{{.*}}) {{.*}} -> (tensor<576xf32>, !fwd.qact<576, one_word>) {
// INT8-NEXT:    ^
// INT8-NEXT:      fwd.fused add_norm covers [11, 12, 13]
// INT8:         %[[G:.*]] = fwd.matmul %[[H1Q]]
// INT8-NEXT:    %[[U:.*]] = fwd.matmul %[[H1Q]]
// INT8-NEXT:    %[[GU:.*]] = fwd.fused elementwise_chains covers [17, 18] ins(%[[G]], %[[U]])
// INT8:         %[[GUQ:.*]] = fwd.quantize %[[GU]] one_word
// INT8-NEXT:    %[[D:.*]] = fwd.matmul %[[GUQ]]
// INT8-NEXT:    %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[D]]
// INT8-NEXT:    func.return %[[OUT]], %[[KR]], %[[V]]

// TWO:       fwd.numerics = {shim = "cuda-forward:TwoPassInt8"
// TWO-LABEL: func.func @decode_step
// TWO:         %[[H0:.*]] = fwd.fused norm_weight covers [0, 1]
// TWO:         %[[H0Q:.*]] = fwd.quantize %[[H0]] two_words
// TWO-NEXT:    fwd.matmul %[[H0Q]]
// TWO-NEXT:    fwd.matmul %[[H0Q]]
// TWO-NEXT:    fwd.matmul %[[H0Q]]
// TWO:         %[[ATT:.*]] = fwd.attention
// TWO-NEXT:    %[[AQ:.*]] = fwd.quantize %[[ATT]] two_words
// TWO-NEXT:    %[[O:.*]] = fwd.matmul %[[AQ]]
// TWO-NEXT:    %[[X1:.*]], %[[H1:.*]] = fwd.fused add_norm covers [11, 12, 13]
// TWO:         %[[H1Q:.*]] = fwd.quantize %[[H1]] two_words
// TWO-NEXT:    fwd.matmul %[[H1Q]]
// TWO-NEXT:    fwd.matmul %[[H1Q]]
// TWO-NEXT:    %[[GU:.*]] = fwd.fused elementwise_chains covers [17, 18]
// TWO:         %[[GUQ:.*]] = fwd.quantize %[[GU]] two_words
// TWO-NEXT:    fwd.matmul %[[GUQ]]
// TWO-NOT:     _quant
