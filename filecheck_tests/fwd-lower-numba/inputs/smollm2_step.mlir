// fwdshim import of a random Q8_0 GGUF of SmolLM2-135M's shape cut to 2 layers (bench/decode_step.py's
// write_random_q8_0 with n_layer=2): llama, 2 layers, d 576, ff 1536, 9 heads / 3 kv heads of 64, vocab 49152, tied output
// the Q/K rows of each layer are un-permuted from GGUF's interleaved layout when loaded
// context capacity l = 4096; per token the runner passes the embedding row, the rope angles
// and the cache rows written so far, and appends the returned k, v rows
func.func @decode_step(%x: tensor<576xf32>, %angles: tensor<2x32xf32>, %l0_k_cache: tensor<4095x192xf32>, %l0_v_cache: tensor<4095x192xf32>, %l1_k_cache: tensor<4095x192xf32>, %l1_v_cache: tensor<4095x192xf32>) -> (tensor<49152xf32>, tensor<192xf32>, tensor<192xf32>, tensor<192xf32>, tensor<192xf32>) {
  // layer 0: attention
  %l0_attn_in_w = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %l0_attn_in_n = fwd.rms_norm %x eps 9.999999747e-06 : tensor<576xf32> -> tensor<576xf32>
  %l0_attn_in = fwd.elementwise mul %l0_attn_in_n, %l0_attn_in_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %l0_q_w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %l0_q = fwd.matmul %l0_attn_in, %l0_q_w : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %l0_k_w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  %l0_k = fwd.matmul %l0_attn_in, %l0_k_w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %l0_v_w = fwd.weight "blk.0.attn_v.weight" : !fwd.weights<192x576, q8_0>
  %l0_v = fwd.matmul %l0_attn_in, %l0_v_w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %l0_q_rot = fwd.rope %l0_q, %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %l0_k_rot = fwd.rope %l0_k, %angles hd 64 half 32 rows 1 : tensor<192xf32>, tensor<2x32xf32> -> tensor<192xf32>
  %l0_att = fwd.attention %l0_q_rot, %l0_k_rot, %l0_v, %l0_k_cache, %l0_v_cache h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  %l0_o_w = fwd.weight "blk.0.attn_output.weight" : !fwd.weights<576x576, q8_0>
  %l0_o = fwd.matmul %l0_att, %l0_o_w : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %l0_x_mid = fwd.elementwise add %x, %l0_o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  // layer 0: SwiGLU MLP
  %l0_ffn_in_w = fwd.weight "blk.0.ffn_norm.weight" : tensor<576xf32>
  %l0_ffn_in_n = fwd.rms_norm %l0_x_mid eps 9.999999747e-06 : tensor<576xf32> -> tensor<576xf32>
  %l0_ffn_in = fwd.elementwise mul %l0_ffn_in_n, %l0_ffn_in_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %l0_gate_w = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<1536x576, q8_0>
  %l0_gate = fwd.matmul %l0_ffn_in, %l0_gate_w : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %l0_up_w = fwd.weight "blk.0.ffn_up.weight" : !fwd.weights<1536x576, q8_0>
  %l0_up = fwd.matmul %l0_ffn_in, %l0_up_w : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %l0_gate_act = fwd.silu %l0_gate : tensor<1536xf32> -> tensor<1536xf32>
  %l0_glu = fwd.elementwise mul %l0_gate_act, %l0_up : tensor<1536xf32>, tensor<1536xf32> -> tensor<1536xf32>
  %l0_down_w = fwd.weight "blk.0.ffn_down.weight" : !fwd.weights<576x1536, q8_0>
  %l0_down = fwd.matmul %l0_glu, %l0_down_w : tensor<1536xf32>, !fwd.weights<576x1536, q8_0> -> tensor<576xf32>
  %l0_x_out = fwd.elementwise add %l0_x_mid, %l0_down : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  // layer 1: attention
  %l1_attn_in_w = fwd.weight "blk.1.attn_norm.weight" : tensor<576xf32>
  %l1_attn_in_n = fwd.rms_norm %l0_x_out eps 9.999999747e-06 : tensor<576xf32> -> tensor<576xf32>
  %l1_attn_in = fwd.elementwise mul %l1_attn_in_n, %l1_attn_in_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %l1_q_w = fwd.weight "blk.1.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %l1_q = fwd.matmul %l1_attn_in, %l1_q_w : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %l1_k_w = fwd.weight "blk.1.attn_k.weight" : !fwd.weights<192x576, q8_0>
  %l1_k = fwd.matmul %l1_attn_in, %l1_k_w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %l1_v_w = fwd.weight "blk.1.attn_v.weight" : !fwd.weights<192x576, q8_0>
  %l1_v = fwd.matmul %l1_attn_in, %l1_v_w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %l1_q_rot = fwd.rope %l1_q, %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %l1_k_rot = fwd.rope %l1_k, %angles hd 64 half 32 rows 1 : tensor<192xf32>, tensor<2x32xf32> -> tensor<192xf32>
  %l1_att = fwd.attention %l1_q_rot, %l1_k_rot, %l1_v, %l1_k_cache, %l1_v_cache h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  %l1_o_w = fwd.weight "blk.1.attn_output.weight" : !fwd.weights<576x576, q8_0>
  %l1_o = fwd.matmul %l1_att, %l1_o_w : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %l1_x_mid = fwd.elementwise add %l0_x_out, %l1_o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  // layer 1: SwiGLU MLP
  %l1_ffn_in_w = fwd.weight "blk.1.ffn_norm.weight" : tensor<576xf32>
  %l1_ffn_in_n = fwd.rms_norm %l1_x_mid eps 9.999999747e-06 : tensor<576xf32> -> tensor<576xf32>
  %l1_ffn_in = fwd.elementwise mul %l1_ffn_in_n, %l1_ffn_in_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %l1_gate_w = fwd.weight "blk.1.ffn_gate.weight" : !fwd.weights<1536x576, q8_0>
  %l1_gate = fwd.matmul %l1_ffn_in, %l1_gate_w : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %l1_up_w = fwd.weight "blk.1.ffn_up.weight" : !fwd.weights<1536x576, q8_0>
  %l1_up = fwd.matmul %l1_ffn_in, %l1_up_w : tensor<576xf32>, !fwd.weights<1536x576, q8_0> -> tensor<1536xf32>
  %l1_gate_act = fwd.silu %l1_gate : tensor<1536xf32> -> tensor<1536xf32>
  %l1_glu = fwd.elementwise mul %l1_gate_act, %l1_up : tensor<1536xf32>, tensor<1536xf32> -> tensor<1536xf32>
  %l1_down_w = fwd.weight "blk.1.ffn_down.weight" : !fwd.weights<576x1536, q8_0>
  %l1_down = fwd.matmul %l1_glu, %l1_down_w : tensor<1536xf32>, !fwd.weights<576x1536, q8_0> -> tensor<576xf32>
  %l1_x_out = fwd.elementwise add %l1_x_mid, %l1_down : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  // logits
  %out_w = fwd.weight "output_norm.weight" : tensor<576xf32>
  %out_n = fwd.rms_norm %l1_x_out eps 9.999999747e-06 : tensor<576xf32> -> tensor<576xf32>
  %out = fwd.elementwise mul %out_n, %out_w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %logits_w = fwd.weight "token_embd.weight" : !fwd.weights<49152x576, q8_0>
  %logits = fwd.matmul %out, %logits_w : tensor<576xf32>, !fwd.weights<49152x576, q8_0> -> tensor<49152xf32>
  func.return %logits, %l0_k_rot, %l0_v, %l1_k_rot, %l1_v : tensor<49152xf32>, tensor<192xf32>, tensor<192xf32>, tensor<192xf32>, tensor<192xf32>
}
