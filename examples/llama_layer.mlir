// One Llama-style decode layer (SmolLM-135M sizes: d = 576, 9 query heads, 3 kv heads of 64, ffn 1536),
// Q8_0 projections, as a GGUF model's block 0. One query row attends the 4095 cached positions plus its own.
//
// %x        the residual stream entering the layer
// %angles   this position's rope angles: row 0 cos, row 1 sin, 32 pairs per head
// %k_cache  the k rows of the positions before this one ([l-1, kv*hd]); %v_cache likewise
// returns   the layer's output and the k, v rows of this position (the runtime appends them to the caches)
//
// Run: fwdshim-opt examples/llama_layer.mlir
func.func @decode_step(%x: tensor<576xf32>, %angles: tensor<2x32xf32>, %k_cache: tensor<4095x192xf32>, %v_cache: tensor<4095x192xf32>) -> (tensor<576xf32>, tensor<192xf32>, tensor<192xf32>) {
  %attn_norm_w = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %wq = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %wk = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  %wv = fwd.weight "blk.0.attn_v.weight" : !fwd.weights<192x576, q8_0>
  %wo = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<576x576, q8_0>
  %ffn_norm_w = fwd.weight "blk.0.ffn_norm.weight" : tensor<576xf32>
  %wgate = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<1536x576, q8_0>
  %wup = fwd.weight "blk.0.ffn_up.weight" : !fwd.weights<1536x576, q8_0>
  %wdown = fwd.weight "blk.0.ffn_down.weight" : !fwd.weights<576x1536, q8_0>

  // attention block: weighted RMS norm (norm_weight fuses the two), q/k/v, rope, GQA attention, o, residual
  %n0 = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h0 = fwd.elementwise mul %n0, %attn_norm_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %q = fwd.matmul %h0, %wq : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %k = fwd.matmul %h0, %wk : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %v = fwd.matmul %h0, %wv : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %q_r = fwd.rope %q, %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %k_r = fwd.rope %k, %angles hd 64 half 32 rows 1 : tensor<192xf32>, tensor<2x32xf32> -> tensor<192xf32>
  %att = fwd.attention %q_r, %k_r, %v, %k_cache, %v_cache h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  %o = fwd.matmul %att, %wo : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %x1 = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>

  // MLP block: weighted RMS norm, SwiGLU (silu(gate) * up), down, residual
  %n1 = fwd.rms_norm %x1 eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h1 = fwd.elementwise mul %n1, %ffn_norm_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %g = fwd.matmul %h1, %wgate : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %u = fwd.matmul %h1, %wup : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %g_act = fwd.silu %g : tensor<1536xf32> -> tensor<1536xf32>
  %gu = fwd.elementwise mul %g_act, %u : tensor<1536xf32>, tensor<1536xf32> -> tensor<1536xf32>
  %d = fwd.matmul %gu, %wdown : tensor<1536xf32>, !fwd.weights<576x1536, q8_0> -> tensor<576xf32>
  %out = fwd.elementwise add %x1, %d : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %out, %k_r, %v : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>
}
