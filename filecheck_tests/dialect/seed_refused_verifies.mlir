// A verifier checks structure only: IR that the forward's kernels refuse (the seed's kernel_refusal, fits
// and accumulator width) parses and verifies, so that fwd-legalize can refuse it with the seed's reason.
// RUN: fwdshim-opt %s | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt | filecheck %s

// Query heads not grouped evenly over kv heads (h % kv != 0).
// CHECK-LABEL: func.func @gqa_uneven
// CHECK: fwd.attention %q, %k, %v, %kc, %vc h 9 kv 2 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<128xf32>, tensor<128xf32>, tensor<4095x128xf32>, tensor<4095x128xf32> -> tensor<576xf32>
func.func @gqa_uneven(%q: tensor<576xf32>, %k: tensor<128xf32>, %v: tensor<128xf32>, %kc: tensor<4095x128xf32>, %vc: tensor<4095x128xf32>) -> tensor<576xf32> {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 2 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<128xf32>, tensor<128xf32>, tensor<4095x128xf32>, tensor<4095x128xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// A cache past the 48 KiB score row: l = 12257 (12256 cached rows; at most 12256 positions fit).
// CHECK-LABEL: func.func @score_row_past_48k
// CHECK: fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 12257 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<12256x192xf32>, tensor<12256x192xf32> -> tensor<576xf32>
func.func @score_row_past_48k(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<12256x192xf32>, %vc: tensor<12256x192xf32>) -> tensor<576xf32> {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 12257 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<12256x192xf32>, tensor<12256x192xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// Soft-capped and windowed attention, and several query rows.
// CHECK-LABEL: func.func @attention_variants
// CHECK: fwd.attention {{.*}} h 9 kv 3 hd 64 vd 64 l 4096 rows 1 softcap 5.000000e+01 window 1024 :
// CHECK: fwd.attention {{.*}} h 9 kv 3 hd 64 vd 64 l 4096 rows 2 :
func.func @attention_variants(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>, %q2: tensor<2x576xf32>, %k2: tensor<2x192xf32>, %v2: tensor<2x192xf32>) -> (tensor<576xf32>, tensor<2x576xf32>) {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 softcap 50.0 window 1024 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  %b = fwd.attention %q2, %k2, %v2, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 2 : tensor<2x576xf32>, tensor<2x192xf32>, tensor<2x192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<2x576xf32>
  func.return %a, %b : tensor<576xf32>, tensor<2x576xf32>
}

// A partial rotary (hd != 2 * half), a rope with a row of angles per row, a rope reading a cache of angles.
// CHECK-LABEL: func.func @rope_variants
// CHECK: fwd.rope %q, %a hd 64 half 16 rows 1 :
// CHECK: fwd.rope %q, %a hd 64 half 32 rows 9 :
// CHECK: fwd.rope %q, %t hd 64 half 32 rows 1 from 100 :
func.func @rope_variants(%q: tensor<576xf32>, %a: tensor<2x32xf32>, %t: tensor<4096x64xf32>) -> (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) {
  %r0 = fwd.rope %q, %a hd 64 half 16 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %r1 = fwd.rope %q, %a hd 64 half 32 rows 9 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %r2 = fwd.rope %q, %t hd 64 half 32 rows 1 from 100 : tensor<576xf32>, tensor<4096x64xf32> -> tensor<576xf32>
  func.return %r0, %r1, %r2 : tensor<576xf32>, tensor<576xf32>, tensor<576xf32>
}

// 64-bit values: the forward's kernels accumulate in 32 bits.
// CHECK-LABEL: func.func @wide_values
// CHECK: fwd.rms_norm %x eps 1.000000e-05 : tensor<576xf64> -> tensor<576xf64>
// CHECK: fwd.elementwise add %x, %x : tensor<576xf64>, tensor<576xf64> -> tensor<576xf64>
// CHECK: fwd.matmul %x, %w : tensor<576xf64>, !fwd.weights<192x576, f64> -> tensor<192xf64>
// CHECK: fwd.elementwise add %i, %i : tensor<576xi64>, tensor<576xi64> -> tensor<576xi64>
func.func @wide_values(%x: tensor<576xf64>, %i: tensor<576xi64>) -> (tensor<576xf64>, tensor<576xf64>, tensor<192xf64>, tensor<576xi64>) {
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf64> -> tensor<576xf64>
  %s = fwd.elementwise add %x, %x : tensor<576xf64>, tensor<576xf64> -> tensor<576xf64>
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, f64>
  %y = fwd.matmul %x, %w : tensor<576xf64>, !fwd.weights<192x576, f64> -> tensor<192xf64>
  %j = fwd.elementwise add %i, %i : tensor<576xi64>, tensor<576xi64> -> tensor<576xi64>
  func.return %n, %s, %y, %j : tensor<576xf64>, tensor<576xf64>, tensor<192xf64>, tensor<576xi64>
}

// A matmul over weights the forward's GEMV does not dequantize, and mixtures it does not run: biases,
// no renormalization, a clamped SwiGLU, sigmoid scoring, router weights not Q8_0.
// CHECK-LABEL: func.func @unsupported_weights_and_mixtures
// CHECK: fwd.matmul %x, %w4 : tensor<576xf32>, !fwd.weights<192x576, q4_1> -> tensor<192xf32>
// CHECK: fwd.moe %x, %r, %g, %u, %d router_bias(%rb : tensor<8xf32>) n_expert 8 top_k 2 renormalize act swiglu scoring softmax :
// CHECK: fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 act swiglu scoring softmax :
// CHECK: fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu_clamped scoring sigmoid :
// CHECK: fwd.moe %x, %rf, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, f32>,
func.func @unsupported_weights_and_mixtures(%x: tensor<576xf32>, %rb: tensor<8xf32>) -> (tensor<192xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) {
  %w4 = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q4_1>
  %y = fwd.matmul %x, %w4 : tensor<576xf32>, !fwd.weights<192x576, q4_1> -> tensor<192xf32>
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<8x576, q8_0>
  %rf = fwd.weight "blk.1.ffn_gate_inp.weight" : !fwd.weights<8x576, f32>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  %d = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<8x576x1536, q8_0>
  %m0 = fwd.moe %x, %r, %g, %u, %d router_bias(%rb : tensor<8xf32>) n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  %m1 = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  %m2 = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu_clamped scoring sigmoid : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  %m3 = fwd.moe %x, %rf, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, f32>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %y, %m0, %m1, %m2, %m3 : tensor<192xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>
}

// A fused op of a class the forward refuses (and one it decomposes) met in input IR.
// CHECK-LABEL: func.func @refused_and_decomposed_classes
// CHECK: fwd.fused moe_direct_pairs covers [0]
// CHECK: fwd.fused qk_norm_rope covers [1, 2]
func.func @refused_and_decomposed_classes(%x: tensor<576xf32>, %a: tensor<2x32xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %f = fwd.fused moe_direct_pairs covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%b: tensor<576xf32>):
    %s = fwd.silu %b : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  %g = fwd.fused qk_norm_rope covers [1, 2] ins(%x, %a) : (tensor<576xf32>, tensor<2x32xf32>) -> tensor<576xf32> {
  ^bb0(%b: tensor<576xf32>, %c: tensor<2x32xf32>):
    %n = fwd.rms_norm %b eps 1.0e-06 : tensor<576xf32> -> tensor<576xf32>
    %r = fwd.rope %n, %c hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
    fwd.yield %r : tensor<576xf32>
  }
  func.return %f, %g : tensor<576xf32>, tensor<576xf32>
}
