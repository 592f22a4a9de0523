// The seed's kernel_refusal, branch by branch (K01-K22; K23 in no_kernel.mlir), in strict mode: each
// refused op is an error at its location with the seed's reason. Also the order of checks within an op.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s

// Every primitive the forward's kernels compute: no error; the module carries the contract.
// The attention attends l = 12256 positions: 12256*4 + 32*4 = 49152 bytes, exactly 48 KiB.
// CHECK: builtin.module attributes {fwd.numerics = {shim = "cuda-forward:Dequant", point = "the older forward: Dequant activations", activations = "none", cache = "f32", state = "f32", attention = "none", fused = "exact", accumulator_bits = 32 : i64}}
// CHECK-LABEL: func.func @computed
// CHECK-COUNT-3: fwd.matmul
// CHECK: fwd.attention {{.*}} l 12256 rows 1 :
// CHECK: fwd.moe
// CHECK-NOT: error
// CHECK: //{{ -----}}
func.func @computed(%x: tensor<64xf32>, %y: tensor<64xf32>, %wd: tensor<32x64xf16>, %ang: tensor<2x16xf32>, %q: tensor<32xf32>, %k: tensor<32xf32>, %v: tensor<32xf32>, %kc: tensor<12255x32xf32>, %vc: tensor<12255x32xf32>) {
  %w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<32x64, q8_0>
  %wh = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<32x64, f16>
  %m = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  %mh = fwd.matmul %x, %wh : tensor<64xf32>, !fwd.weights<32x64, f16> -> tensor<32xf32>
  %md = fwd.matmul %x, %wd : tensor<64xf32>, tensor<32x64xf16> -> tensor<32xf32>
  %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %t = fwd.transpose %x : tensor<64xf32> -> tensor<64xf32>
  %e = fwd.elementwise div %x, %y : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %x weight(%y : tensor<64xf32>) residual(%y : tensor<64xf32>) eps 1.0e-06 : tensor<64xf32> -> tensor<64xf32>
  %sm = fwd.softmax %x : tensor<64xf32> -> tensor<64xf32>
  %ln = fwd.layer_norm %x weight(%y : tensor<64xf32>) bias(%y : tensor<64xf32>) eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  %ry = fwd.rope %x, %ang hd 32 half 16 rows 1 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32>
  %att = fwd.attention %q, %k, %v, %kc, %vc h 1 kv 1 hd 32 vd 32 l 12256 rows 1 : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<12255x32xf32>, tensor<12255x32xf32> -> tensor<32xf32>
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax groups 1 scale 1.0 : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K01: an elementwise op with `row`
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an elementwise op over a row combined with every row of a block — its kernel reads both at one index
func.func @elementwise_row(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.elementwise add %x, %y row : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K02
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a bias on an RMSNorm — its kernel scales and never shifts
func.func @rms_norm_bias(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.rms_norm %x bias(%y : tensor<64xf32>) eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K03: a weight on a softmax
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a weight, residual or bias on a softmax
func.func @softmax_weight(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.softmax %x weight(%y : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K03: a residual on a softmax
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a weight, residual or bias on a softmax
func.func @softmax_residual(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.softmax %x residual(%y : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K03: a bias on a softmax
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a weight, residual or bias on a softmax
func.func @softmax_bias(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.softmax %x bias(%y : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K04
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a residual added before a layernorm
func.func @layer_norm_residual(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.layer_norm %x residual(%y : tensor<64xf32>) eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K05
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a rope reading its angles from a position in a cache of angles
func.func @rope_from(%x: tensor<64xf32>, %ang: tensor<2x16xf32>) {
  %y = fwd.rope %x, %ang hd 32 half 16 rows 1 from 3 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32>
  func.return
}

// -----

// K06
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a rope with a table row per row of the query — its kernel reads one row of angles
func.func @rope_rows(%x: tensor<64xf32>, %ang: tensor<2x16xf32>) {
  %y = fwd.rope %x, %ang hd 32 half 16 rows 2 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32>
  func.return
}

// -----

// K07: hd != 2*half
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a partial rotary — its kernel turns every dimension of the head
func.func @rope_partial(%x: tensor<64xf32>, %ang: tensor<2x8xf32>) {
  %y = fwd.rope %x, %ang hd 32 half 8 rows 1 : tensor<64xf32>, tensor<2x8xf32> -> tensor<64xf32>
  func.return
}

// -----

// order: a rope with `from`, rows != 1 and a partial rotary reports `from`
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a rope reading its angles from a position in a cache of angles
func.func @rope_order(%x: tensor<64xf32>, %ang: tensor<2x8xf32>) {
  %y = fwd.rope %x, %ang hd 32 half 8 rows 2 from 3 : tensor<64xf32>, tensor<2x8xf32> -> tensor<64xf32>
  func.return
}

// -----

// order: rows before the partial rotary
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a rope with a table row per row of the query — its kernel reads one row of angles
func.func @rope_order_rows(%x: tensor<64xf32>, %ang: tensor<2x8xf32>) {
  %y = fwd.rope %x, %ang hd 32 half 8 rows 2 : tensor<64xf32>, tensor<2x8xf32> -> tensor<64xf32>
  func.return
}

// -----

// K08
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a soft-capped attention (`softcap C`) — its kernel caps no score
func.func @attention_softcap(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 1 softcap 3.0e+01 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// K09
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a gated delta gated by a sigmoid (`gate sigmoid`) — its kernel gates by SiLU
func.func @gated_delta_sigmoid(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.gated_delta sigmoid %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K10
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a masked attention (`pos P`) — its kernel attends every cached position
func.func @attention_pos(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 1 pos 5 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// K11: the fwd.softcap op
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a soft-capped tensor (`cap C`) — no kernel caps one
func.func @softcap(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.softcap %x cap 3.0e+01 : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// K12
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an attention with sinks (`sinks(S)`) — its kernel's softmax has no sink
func.func @attention_sinks(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>, %sk: tensor<4xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc sinks(%sk : tensor<4xf32>) h 4 kv 2 hd 32 vd 32 l 8 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// K13
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a windowed attention (`window W`) — its kernel attends every cached position
func.func @attention_window(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 1 window 4 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// K14: vd < hd
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an attention whose values are narrower than its keys — its kernel reads values as wide as keys
func.func @attention_vd(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<32xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x32xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 16 l 8 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<32xf32>, tensor<7x64xf32>, tensor<7x32xf32> -> tensor<64xf32>
  func.return
}

// -----

// K15
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an attention with a given scale (`scale S`) — its kernel scales the scores by 1/√HD
func.func @attention_scale(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 1 scale 1.25e-01 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// K16
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a causal block of query rows — its kernel attends for one query
func.func @attention_rows(%q: tensor<256xf32>, %k: tensor<128xf32>, %v: tensor<128xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 8 rows 2 : tensor<256xf32>, tensor<128xf32>, tensor<128xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<256xf32>
  func.return
}

// -----

// K17: h % kv != 0
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: query heads that do not group evenly over the key/value heads
func.func @attention_groups(%q: tensor<96xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 3 kv 2 hd 32 vd 32 l 8 rows 1 : tensor<96xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<96xf32>
  func.return
}

// -----

// K17: kv == 0
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: query heads that do not group evenly over the key/value heads
func.func @attention_no_kv(%q: tensor<64xf32>, %k: tensor<0xf32>, %v: tensor<0xf32>, %kc: tensor<1x0xf32>, %vc: tensor<1x0xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 0 hd 32 vd 32 l 2 rows 1 : tensor<64xf32>, tensor<0xf32>, tensor<0xf32>, tensor<1x0xf32>, tensor<1x0xf32> -> tensor<64xf32>
  func.return
}

// -----

// K18: 12257*4 + 32*4 > 48 KiB
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a cache longer than the score row its kernel holds in static shared memory
func.func @attention_12257(%q: tensor<32xf32>, %k: tensor<32xf32>, %v: tensor<32xf32>, %kc: tensor<12256x32xf32>, %vc: tensor<12256x32xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 1 kv 1 hd 32 vd 32 l 12257 rows 1 : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<12256x32xf32>, tensor<12256x32xf32> -> tensor<32xf32>
  func.return
}

// -----

// order: an attention soft-capped, masked, windowed, with sinks... reports its soft cap
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a soft-capped attention (`softcap C`) — its kernel caps no score
func.func @attention_order(%q: tensor<192xf32>, %k: tensor<128xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x32xf32>, %sk: tensor<3xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc sinks(%sk : tensor<3xf32>) h 3 kv 2 hd 32 vd 16 l 8 rows 2 scale 2.0 softcap 3.0e+01 pos 5 window 2 : tensor<192xf32>, tensor<128xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x32xf32> -> tensor<96xf32>
  func.return
}

// -----

// order: masked before sinks and window
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: a masked attention (`pos P`) — its kernel attends every cached position
func.func @attention_order_pos(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>, %sk: tensor<4xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc sinks(%sk : tensor<4xf32>) h 4 kv 2 hd 32 vd 32 l 8 rows 1 scale 2.0 pos 5 window 2 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// order: sinks before window
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an attention with sinks (`sinks(S)`) — its kernel's softmax has no sink
func.func @attention_order_sinks(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>, %sk: tensor<4xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc sinks(%sk : tensor<4xf32>) h 4 kv 2 hd 32 vd 32 l 8 rows 1 scale 2.0 window 2 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  func.return
}

// -----

// order: narrow values before scale and groups
// CHECK: kernel_refusal.mlir:[[# @LINE + 2]]:3: error: an attention whose values are narrower than its keys — its kernel reads values as wide as keys
func.func @attention_order_vd(%q: tensor<96xf32>, %k: tensor<64xf32>, %v: tensor<32xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x32xf32>) {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 3 kv 2 hd 32 vd 16 l 8 rows 1 scale 2.0 : tensor<96xf32>, tensor<64xf32>, tensor<32xf32>, tensor<7x64xf32>, tensor<7x32xf32> -> tensor<48xf32>
  func.return
}

// -----

// K19: a router bias
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture with biases — its kernels add none
func.func @moe_router_bias(%x: tensor<64xf32>, %rb: tensor<4xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn router_bias(%rb : tensor<4xf32>) n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K19: an expert bias
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture with biases — its kernels add none
func.func @moe_expert_bias(%x: tensor<64xf32>, %gb: tensor<4x32xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn gate_bias(%gb : tensor<4x32xf32>) n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K20
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture without renormalizing — its router renormalizes the kept experts' weights
func.func @moe_no_renormalize(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 act swiglu scoring softmax : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K21
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture with a clamped SwiGLU — its kernels gate with SwiGLU
func.func @moe_clamped(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu_clamped scoring softmax : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K22: sigmoid
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs
func.func @moe_sigmoid(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring sigmoid : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K22: groups
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs
func.func @moe_groups(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax groups 2 : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K22: scaled
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs
func.func @moe_scaled(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax scale 2.5 : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K22: weight_inputs
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs
func.func @moe_weight_inputs(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax weight_inputs : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// K22: a selection bias (not one of the `biases`)
// CHECK: kernel_refusal.mlir:[[# @LINE + 6]]:3: error: an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs
func.func @moe_selection_bias(%x: tensor<64xf32>, %sb: tensor<4xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn selection_bias(%sb : tensor<4xf32>) n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, !fwd.weights<4x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}
