// Invalid IR: one case per verifier message of the `fwd` dialect, each reported at the failing op's
// `file:line:col` (LocatingParser records where every op was parsed).
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @access_count(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: `access` gives 2 entries for 1 operands
  %s = fwd.silu %x access [#fwd.access<whole>, #fwd.access<strided>] : tensor<576xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @unary_size(%x: tensor<576xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.silu result has 64 values for 576 inputs
  %s = fwd.silu %x : tensor<576xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

func.func @transpose_size(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.transpose result has 64 values for 32 inputs
  %t = fwd.transpose %x : tensor<4x8xf32> -> tensor<8x8xf32>
  func.return %t : tensor<8x8xf32>
}

// -----

func.func @transpose_not_permuted(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: transpose result is 2x16, not 8x4 (x is 4x8, its dims reversed)
  %t = fwd.transpose %x : tensor<4x8xf32> -> tensor<2x16xf32>
  func.return %t : tensor<2x16xf32>
}

// -----

func.func @transpose_same_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: transpose result is 4x8, not 8x4 (x is 4x8, its dims reversed)
  %t = fwd.transpose %x : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>
}

// -----

func.func @transpose_rank3(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: transpose result is 3x2x4, not 4x3x2 (x is 2x3x4, its dims reversed)
  %t = fwd.transpose %x : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  func.return %t : tensor<3x2x4xf32>
}

// -----

// CHECK: invalid_verify.mlir:[[# @LINE + 1]]:1: error: fwd.weight result is !fwd.weights or a tensor
%w = fwd.weight "blk.0.attn_q.weight" : f32

// -----

// A name no GGUF tensor has: empty, or with a control character (both passed to the plan and failed
// only when the weights were loaded).
// CHECK: invalid_verify.mlir:[[# @LINE + 1]]:1: error: fwd.weight name is empty: it names a GGUF tensor
%w = fwd.weight "" : !fwd.weights<64x64, q8_0>

// -----

// CHECK: invalid_verify.mlir:[[# @LINE + 1]]:1: error: fwd.weight names a GGUF tensor: its name "ab\00cd" holds the control character '\x00' (byte 0x00)
%w = fwd.weight "ab\00cd" : !fwd.weights<64x64, q8_0>

// -----

func.func @matmul_rank(%x: tensor<576xf32>) -> tensor<1536xf32> {
  %w = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul w must be a rank-2 weight [N, K], not !fwd.weights<8x1536x576, q8_0>
  %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<8x1536x576, q8_0> -> tensor<1536xf32>
  func.return %y : tensor<1536xf32>
}

// -----

func.func @matmul_unranked(%x: f32) -> tensor<192xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul x and result must be tensors of rank >= 1, not f32 -> tensor<192xf32>
  %y = fwd.matmul %x, %w : f32, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  func.return %y : tensor<192xf32>
}

// -----

func.func @matmul_k(%x: tensor<512xf32>) -> tensor<192xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul x rows have 512 values, w rows have 576
  %y = fwd.matmul %x, %w : tensor<512xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  func.return %y : tensor<192xf32>
}

// -----

func.func @matmul_n(%x: tensor<576xf32>) -> tensor<576xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul result rows have 576 values, w has 192 rows
  %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<576xf32>
  func.return %y : tensor<576xf32>
}

// -----

func.func @matmul_heads(%x: tensor<576xf32>) -> tensor<4x64xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul result heads 4x64 hold 256 values, w has 192 rows
  %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}

// -----

func.func @matmul_rows(%x: tensor<3x576xf32>) -> tensor<2x192xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul result is 2x192, not 3x192 (one row of 192 for each row of x, 3x576)
  %y = fwd.matmul %x, %w : tensor<3x576xf32>, !fwd.weights<192x576, q8_0> -> tensor<2x192xf32>
  func.return %y : tensor<2x192xf32>
}

// -----

func.func @matmul_rank_of_rows(%x: tensor<2x576xf32>) -> tensor<192xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul result is 192, not 2x192 (one row of 192 for each row of x, 2x576)
  %y = fwd.matmul %x, %w : tensor<2x576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  func.return %y : tensor<192xf32>
}

// -----

func.func @matmul_rank_3_of_a_vector(%x: tensor<576xf32>) -> tensor<1x1x192xf32> {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: matmul result is 1x1x192, not 192 (one row of 192 for each row of x, 576)
  %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<1x1x192xf32>
  func.return %y : tensor<1x1x192xf32>
}

// -----

func.func @softcap_size(%x: tensor<64xf32>) -> tensor<32xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.softcap result has 32 values for 64 inputs
  %s = fwd.softcap %x cap 3.0e+01 : tensor<64xf32> -> tensor<32xf32>
  func.return %s : tensor<32xf32>
}

// -----

func.func @elementwise_shape(%a: tensor<576xf32>, %b: tensor<192xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: elementwise operands and result agree in shape unless `row`
  %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<192xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @elementwise_row_width(%a: tensor<9x64xf32>, %b: tensor<32xf32>) -> tensor<9x64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: elementwise row b has 32 values for rows of 64 (a is 9x64)
  %s = fwd.elementwise mul %a, %b row : tensor<9x64xf32>, tensor<32xf32> -> tensor<9x64xf32>
  func.return %s : tensor<9x64xf32>
}

// -----

// The row may come first; a row of 64 in a flat 576 is not one of its rows (rows are the last dim).
func.func @elementwise_row_first(%a: tensor<64xf32>, %b: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: elementwise row a has 64 values for rows of 576 (b is 576)
  %s = fwd.elementwise sub %a, %b row : tensor<64xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @elementwise_row_result(%a: tensor<9x64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: elementwise row result has the shape of a (64 is not 9x64)
  %s = fwd.elementwise mul %a, %b row : tensor<9x64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

func.func @elementwise_row_scalar(%a: tensor<64xf32>, %b: f32) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: elementwise `row` operands are tensors of rank 1 or more, not tensor<64xf32> and f32
  %s = fwd.elementwise mul %a, %b row : tensor<64xf32>, f32 -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

func.func @norm_unranked(%x: f32) -> f32 {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm x must be a tensor of rank >= 1, not f32
  %n = fwd.rms_norm %x eps 1.0e-05 : f32 -> f32
  func.return %n : f32
}

// -----

func.func @norm_rank0(%x: tensor<f32>) -> tensor<f32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm x must be a tensor of rank >= 1, not tensor<f32>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<f32> -> tensor<f32>
  func.return %n : tensor<f32>
}

// -----

func.func @norm_weight(%x: tensor<576xf32>, %w: tensor<64xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm weight has 64 values for rows of 576
  %n = fwd.rms_norm %x weight(%w : tensor<64xf32>) eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  func.return %n : tensor<576xf32>
}

// -----

func.func @norm_bias(%x: tensor<576xf32>, %b: tensor<32xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.layer_norm bias has 32 values for rows of 576
  %n = fwd.layer_norm %x bias(%b : tensor<32xf32>) : tensor<576xf32> -> tensor<576xf32>
  func.return %n : tensor<576xf32>
}

// -----

func.func @norm_residual(%x: tensor<9x64xf32>, %r: tensor<576xf32>) -> tensor<9x64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.softmax residual has the shape of x
  %n = fwd.softmax %x residual(%r : tensor<576xf32>) : tensor<9x64xf32> -> tensor<9x64xf32>
  func.return %n : tensor<9x64xf32>
}

// -----

func.func @norm_result(%x: tensor<9x64xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm result has the shape of x
  %n = fwd.rms_norm %x : tensor<9x64xf32> -> tensor<576xf32>
  func.return %n : tensor<576xf32>
}

// -----

func.func @rope_positive(%q: tensor<576xf32>, %a: tensor<2x32xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: rope hd, half and rows are positive
  %r = fwd.rope %q, %a hd 0 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  func.return %r : tensor<576xf32>
}

// -----

func.func @rope_heads(%q: tensor<100xf32>, %a: tensor<2x32xf32>) -> tensor<100xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: rope x of 100 values is not made of 64-wide heads
  %r = fwd.rope %q, %a hd 64 half 32 rows 1 : tensor<100xf32>, tensor<2x32xf32> -> tensor<100xf32>
  func.return %r : tensor<100xf32>
}

// -----

func.func @rope_result(%q: tensor<576xf32>, %a: tensor<2x32xf32>) -> tensor<9x64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: rope result has the shape of x
  %r = fwd.rope %q, %a hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<9x64xf32>
  func.return %r : tensor<9x64xf32>
}

// -----

func.func @attention_l(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<0x192xf32>, %vc: tensor<0x192xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention sizes are non-negative and l >= 1
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 0 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<0x192xf32>, tensor<0x192xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// -----

func.func @attention_q(%q: tensor<512xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention q has 512 values, not rows*h*hd = 576
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<512xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// -----

func.func @attention_k(%q: tensor<576xf32>, %k: tensor<64xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention k has 64 values, not rows*kv*hd = 192
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<64xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// -----

func.func @attention_v(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x96xf32>) -> tensor<288xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention v has 192 values, not rows*kv*vd = 96
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 32 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x96xf32> -> tensor<288xf32>
  func.return %a : tensor<288xf32>
}

// -----

func.func @attention_k_cache(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4096x192xf32>, %vc: tensor<4095x192xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention k_cache is 4096x192, not (l-1) x kv*hd = 4095x192
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4096x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// -----

func.func @attention_v_cache(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<192x4095xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention v_cache is 192x4095, not (l-1) x kv*vd = 4095x192
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<192x4095xf32> -> tensor<576xf32>
  func.return %a : tensor<576xf32>
}

// -----

func.func @attention_result(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>) -> tensor<192xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: attention result has 192 values, not rows*h*vd = 576
  %a = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<192xf32>
  func.return %a : tensor<192xf32>
}

// -----

func.func @moe_positive(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe n_expert and top_k are positive
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 0 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_top_k(%x: tensor<576xf32>, %r: !fwd.weights<2x576, q8_0>, %g: !fwd.weights<2x1536x576, q8_0>, %u: !fwd.weights<2x1536x576, q8_0>, %d: !fwd.weights<2x576x1536, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe top_k = 3 exceeds n_expert = 2
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 2 top_k 3 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<2x576, q8_0>, !fwd.weights<2x1536x576, q8_0>, !fwd.weights<2x1536x576, q8_0>, !fwd.weights<2x576x1536, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_router(%x: tensor<576xf32>, %r: !fwd.weights<576x8, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe router is not n_expert x d = 8x576
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<576x8, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_gate(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe gate_exps is not 8 x ff x 576
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_up(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1024x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe up_exps is not 8x1536x576, like gate_exps
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1024x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_down(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x1536x576, q8_0>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe down_exps is not 8x576x1536
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0> -> tensor<576xf32>
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_result(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<1536xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: moe result has the size of x
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<1536xf32>
  func.return %m : tensor<1536xf32>
}

// -----

func.func @quantize_size(%x: tensor<576xf32>) -> !fwd.qact<512, one_word> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: quantize result holds 512 values, x has 576
  %q = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<512, one_word>
  func.return %q : !fwd.qact<512, one_word>
}

// -----

func.func @quantize_format(%x: tensor<576xf32>) -> !fwd.qact<576, two_words> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: quantize result format differs from `format`
  %q = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<576, two_words>
  func.return %q : !fwd.qact<576, two_words>
}

// -----

func.func @view_past_end(%x: tensor<96xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: view of 64 values at offset 40 reads past the end of x (40 + 64 > 96)
  %v = fwd.view %x offset 40 : tensor<96xf32> -> tensor<64xf32>
  func.return %v : tensor<64xf32>
}

// -----

func.func @view_larger(%x: tensor<96xf32>) -> tensor<2x64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: view of 128 values at offset 0 reads past the end of x (0 + 128 > 96)
  %v = fwd.view %x : tensor<96xf32> -> tensor<2x64xf32>
  func.return %v : tensor<2x64xf32>
}

// -----

func.func @view_negative_offset(%x: tensor<96xf32>) -> tensor<32xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: view offset is negative (-8)
  %v = fwd.view %x offset -8 : tensor<96xf32> -> tensor<32xf32>
  func.return %v : tensor<32xf32>
}

// -----

// A view read other than whole does not say how far it reaches: its first value is inside x.
func.func @view_strided_offset(%x: tensor<96xf32>) -> tensor<32xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: view offset 96 is past the end of x (96 values)
  %v = fwd.view %x offset 96 access [#fwd.access<strided>] : tensor<96xf32> -> tensor<32xf32>
  func.return %v : tensor<32xf32>
}

// -----

// A view of no values is refused as every typed stage yielding none is (a negative size does not parse).
func.func @view_empty(%x: tensor<96xf32>) -> tensor<0xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.view yields no values (tensor<0xf32>)
  %v = fwd.view %x offset 8 : tensor<96xf32> -> tensor<0xf32>
  func.return %v : tensor<0xf32>
}

// -----

func.func @view_of_scalar(%x: f32) -> tensor<32xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: view x is a tensor, not f32
  %v = fwd.view %x : f32 -> tensor<32xf32>
  func.return %v : tensor<32xf32>
}

// -----

func.func @fused_class(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: unknown fused class `add_norm_silu`
  %f = fwd.fused add_norm_silu covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_covers_order(%x: tensor<576xf32>, %y: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused covers are not strictly increasing
  %f = fwd.fused add_norm covers [4, 4] ins(%x, %y) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %n : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_no_parts() {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused op has no parts
  fwd.fused add_norm covers [] : () -> () {
    fwd.yield
  }
  func.return
}

// -----

func.func @fused_covers_count(%x: tensor<576xf32>, %y: tensor<576xf32>) -> tensor<576xf32> {
  // More covers than parts is valid (a pass such as cse merged identical parts); fewer is not.
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused covers list 1 stages for 2 parts
  %f = fwd.fused add_norm covers [3] ins(%x, %y) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %n : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_nested_covers_count(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
  // A nested fused part covers as many stages as its own leaves: 1 + 2 here, not 2.
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused covers list 2 stages for 3 parts
  %f = fwd.fused add_norm covers [0, 1] ins(%x, %y, %w) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.fused norm_weight covers [1, 2] ins(%s, %c) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
    ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
      %n1 = fwd.rms_norm %s1 eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
      %n2 = fwd.elementwise mul %n1, %c1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
      fwd.yield %n2 : tensor<576xf32>
    }
    fwd.yield %n : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_args(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused region arguments do not match its operands
  %f = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<9x64xf32>):
    %s = fwd.silu %a : tensor<9x64xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_no_yield(%x: tensor<576xf32>) {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused region ends in fwd.silu, not in fwd.yield
  fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> () {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
  }
  func.return
}

// -----

// Another terminator is not counted as a part (it had said "fused covers list 2 stages for 3 parts").
func.func @fused_func_return(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused region ends in func.return, not in fwd.yield
  %f = fwd.fused elementwise_chains covers [0, 1] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    %t = fwd.silu %s : tensor<576xf32> -> tensor<576xf32>
    func.return %t : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_yield(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused yield does not match its results
  %f = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s, %s : tensor<576xf32>, tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

// A result that is a region argument passed through would be a buffer no kernel writes.
func.func @fused_yields_argument(%x: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused op yields one of its own arguments: a fused kernel stores only what its parts compute
  %f:2 = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s, %a : tensor<576xf32>, tensor<576xf32>
  }
  func.return %f#0, %f#1 : tensor<576xf32>, tensor<576xf32>
}

// -----

func.func @fused_uses_outside_value(%x: tensor<576xf32>, %y: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused body uses %y (fwd.elementwise operand 1), defined outside it: a fused op's body sees only its own arguments
  %f = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.elementwise add %a, %y : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

// A nested fused op sees only its own arguments too, not those of the fused op around it.
func.func @fused_nested_uses_outer_value(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
  %f = fwd.fused add_norm covers [0, 1, 2] ins(%x, %y, %w) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:5: error: fused body uses %c (fwd.elementwise operand 1), defined outside it: a fused op's body sees only its own arguments
    %n = fwd.fused norm_weight covers [1, 2] ins(%s) : (tensor<576xf32>) -> tensor<576xf32> {
    ^bb0(%s1: tensor<576xf32>):
      %n1 = fwd.rms_norm %s1 eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
      %n2 = fwd.elementwise mul %n1, %c : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
      fwd.yield %n2 : tensor<576xf32>
    }
    fwd.yield %n : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_uses_own_result(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused body uses %f (fwd.elementwise operand 1), the fused op's own result: a fused op's body sees only its own arguments
  %f = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.elementwise add %a, %f : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @fused_part_not_stage() -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fused part fwd.weight is not a stage
  %f = fwd.fused elementwise_chains covers [0, 1] : () -> tensor<576xf32> {
    %w = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
    %s = fwd.silu %w : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

// A bad part is reported at the part, not at the fused op around it.
func.func @fused_bad_part(%x: tensor<576xf32>) -> tensor<64xf32> {
  %f = fwd.fused elementwise_chains covers [0] ins(%x) : (tensor<576xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<576xf32>):
    // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:5: error: fwd.silu result has 64 values for 576 inputs
    %s = "fwd.silu"(%a) : (tensor<576xf32>) -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

func.func @yield_outside() {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: 'fwd.yield' expects parent op 'fwd.fused'
  fwd.yield
}

// -----

// The generic form is located too, and xDSL's own constraint messages (a missing property).
func.func @generic_missing_property(%a: tensor<576xf32>, %b: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: property 'kind' expected in operation 'fwd.elementwise'
  %s = "fwd.elementwise"(%a, %b) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @generic_property_type(%x: tensor<576xf32>, %a: tensor<2x32xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: Expected attribute i64 but got i32
  %r = "fwd.rope"(%x, %a) <{hd = 64 : i32, half = 32 : i64, rows = 1 : i64}> : (tensor<576xf32>, tensor<2x32xf32>) -> tensor<576xf32>
  func.return %r : tensor<576xf32>
}

// -----

func.func @quantize_result_type(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 2]]:3: error: result 'result' at position 0 does not verify:
  // CHECK-NEXT: tensor<576xf32> should be of base attribute fwd.qact
  %q = "fwd.quantize"(%x) <{format = #fwd.qformat<one_word>}> : (tensor<576xf32>) -> tensor<576xf32>
  func.return %q : tensor<576xf32>
}

// -----

// A rope reads its angles at a position of a cache of angles: not a negative one.
func.func @rope_from_negative(%x: tensor<64xf32>, %ang: tensor<4096x32xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: rope from -1 is not a position of its cache of angles (from >= 0)
  %y = fwd.rope %x, %ang hd 32 half 16 rows 1 from -1 : tensor<64xf32>, tensor<4096x32xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// -----

// A generic form's one attribute where a list is expected: said in IR words (xDSL printed the Python
// class: `but got '<class 'fwdshim.dialects.attributes.AccessAttr'>'`).
"func.func"() <{sym_name = "access_not_a_list", function_type = (tensor<64xf32>) -> tensor<64xf32>}> ({
^bb0(%x: tensor<64xf32>):
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: expected a list of attributes `[...]`, but got one #fwd.access attribute
  %y = "fwd.silu"(%x) <{access = #fwd.access<whole>}> : (tensor<64xf32>) -> tensor<64xf32>
  "func.return"(%y) : (tensor<64xf32>) -> ()
}) : () -> ()

// -----

func.func @weight_slice_empty(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.weight "blk.0.attn_qkv.weight[5:3]" names no rows: a row slice [start:stop] needs start < stop
  %w = fwd.weight "blk.0.attn_qkv.weight[5:3]" : !fwd.weights<64x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<64x64, q8_0> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// -----

func.func @weight_slice_rows(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: invalid_verify.mlir:[[# @LINE + 1]]:3: error: fwd.weight "blk.0.attn_qkv.weight[0:32]" names 32 rows, its type 64x64 holds 64
  %w = fwd.weight "blk.0.attn_qkv.weight[0:32]" : !fwd.weights<64x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<64x64, q8_0> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
