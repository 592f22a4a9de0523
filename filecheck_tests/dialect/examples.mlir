// The bundled examples parse, verify and print (custom form and generic form, back again).
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir | filecheck %s --check-prefix=LLAMA
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir --print-op-generic | fwdshim-opt | filecheck %s --check-prefix=LLAMA
// RUN: fwdshim-opt %S/../../examples/mixtral_layer.mlir | filecheck %s --check-prefix=MIXTRAL
// RUN: fwdshim-opt %S/../../examples/mixtral_layer.mlir --print-op-generic | fwdshim-opt | filecheck %s --check-prefix=MIXTRAL

// LLAMA-LABEL: func.func @decode_step(%x: tensor<576xf32>, %angles: tensor<2x32xf32>, %k_cache: tensor<4095x192xf32>, %v_cache: tensor<4095x192xf32>) -> (tensor<576xf32>, tensor<192xf32>, tensor<192xf32>)
// LLAMA:      %[[NW:.*]] = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
// LLAMA:      %[[WQ:.*]] = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
// LLAMA:      %[[WK:.*]] = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
// LLAMA:      %[[WV:.*]] = fwd.weight "blk.0.attn_v.weight" : !fwd.weights<192x576, q8_0>
// LLAMA:      %[[WO:.*]] = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<576x576, q8_0>
// LLAMA:      fwd.weight "blk.0.ffn_down.weight" : !fwd.weights<576x1536, q8_0>
// LLAMA:      %[[N0:.*]] = fwd.rms_norm %x eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// LLAMA-NEXT: %[[H0:.*]] = fwd.elementwise mul %[[N0]], %[[NW]]
// LLAMA-NEXT: %[[Q:.*]] = fwd.matmul %[[H0]], %[[WQ]] : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
// LLAMA-NEXT: %[[K:.*]] = fwd.matmul %[[H0]], %[[WK]] : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
// LLAMA-NEXT: %[[V:.*]] = fwd.matmul %[[H0]], %[[WV]]
// LLAMA-NEXT: %[[QR:.*]] = fwd.rope %[[Q]], %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
// LLAMA-NEXT: %[[KR:.*]] = fwd.rope %[[K]], %angles hd 64 half 32 rows 1 : tensor<192xf32>, tensor<2x32xf32> -> tensor<192xf32>
// LLAMA-NEXT: %[[A:.*]] = fwd.attention %[[QR]], %[[KR]], %[[V]], %k_cache, %v_cache h 9 kv 3 hd 64 vd 64 l 4096 rows 1 :
// LLAMA-NEXT: %[[O:.*]] = fwd.matmul %[[A]], %[[WO]]
// LLAMA-NEXT: %[[X1:.*]] = fwd.elementwise add %x, %[[O]]
// LLAMA-NEXT: %[[N1:.*]] = fwd.rms_norm %[[X1]] eps 1.000000e-05
// LLAMA-NEXT: %[[H1:.*]] = fwd.elementwise mul %[[N1]],
// LLAMA-NEXT: %[[G:.*]] = fwd.matmul %[[H1]], {{.*}} -> tensor<1536xf32>
// LLAMA-NEXT: %[[U:.*]] = fwd.matmul %[[H1]], {{.*}} -> tensor<1536xf32>
// LLAMA-NEXT: %[[GA:.*]] = fwd.silu %[[G]] : tensor<1536xf32> -> tensor<1536xf32>
// LLAMA-NEXT: %[[GU:.*]] = fwd.elementwise mul %[[GA]], %[[U]]
// LLAMA-NEXT: %[[D:.*]] = fwd.matmul %[[GU]], {{.*}} : tensor<1536xf32>, !fwd.weights<576x1536, q8_0> -> tensor<576xf32>
// LLAMA-NEXT: %[[OUT:.*]] = fwd.elementwise add %[[X1]], %[[D]]
// LLAMA-NEXT: func.return %[[OUT]], %[[KR]], %[[V]] : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>

// MIXTRAL-LABEL: func.func @decode_step
// MIXTRAL:      %[[R:.*]] = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<8x576, q8_0>
// MIXTRAL-NEXT: %[[G:.*]] = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
// MIXTRAL-NEXT: %[[U:.*]] = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<8x1536x576, q8_0>
// MIXTRAL-NEXT: %[[D:.*]] = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<8x576x1536, q8_0>
// MIXTRAL:      fwd.attention {{.*}} h 9 kv 3 hd 64 vd 64 l 4096 rows 1
// MIXTRAL:      %[[H1:.*]] = fwd.elementwise mul
// MIXTRAL-NEXT: %[[M:.*]] = fwd.moe %[[H1]], %[[R]], %[[G]], %[[U]], %[[D]] n_expert 8 top_k 2 renormalize act swiglu scoring softmax :
// MIXTRAL-NEXT: %[[OUT:.*]] = fwd.elementwise add %{{.*}}, %[[M]]
// MIXTRAL-NEXT: func.return %[[OUT]]
// MIXTRAL-NOT:  fwd.matmul
