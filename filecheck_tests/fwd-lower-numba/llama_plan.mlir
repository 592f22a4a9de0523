// The launch plan of the Llama example under each numerics: one kernel a stage, fused classes one
// kernel each, every buffer with its role, each launch with what it reads and writes; after the
// last stage the runtime's kv_append (the step's k, v rows into row %cache_len of the caches); then
// the launches of the graph, each holding its stages' kernels (codegen.merge).
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true}' | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=dequant}' -t 'numba{plan_only=true}' | filecheck %s --check-prefix=DEQ
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=two-pass-int8}' -t 'numba{plan_only=true}' | filecheck %s --check-prefix=TWO

// INT8:      // launch plan @decode_step: 15 stages, 6 kernels, 34 buffers
// INT8-NEXT: //   inputs (%x, %angles, %k_cache, %v_cache) -> outputs (%out, %k_r, %v)
// INT8-NEXT: //   the step needs {{[0-9.]+}} GiB of device memory ({{.*}} GiB of buffers, the largest %{{[a-z_]+}} {{.*}} GiB; {{.*}} GiB of weights)
// INT8-NEXT: // buffers:
// INT8-NEXT: //   %x {{ +}}input{{ +}}f32[576] = data f32[576]
// INT8-NEXT: //   %angles {{ +}}input{{ +}}f32[2x32] = data f32[64]
// INT8-NEXT: //   %k_cache {{ +}}cache{{ +}}f32[4095x192] = data f32[786240]
// INT8-NEXT: //   %v_cache {{ +}}cache{{ +}}f32[4095x192] = data f32[786240]
// INT8-NEXT: //   %attn_norm_w {{ +}}weight{{ +}}f32[576] = data f32[576]
// INT8-NEXT: //   %wq {{ +}}weight{{ +}}q8_0[576x576] = qs i8[331776], dw f32[10368]
// INT8:      //   %h0_q {{ +}}intermediate{{ +}}qact.one_word[576] = q i8[576], d f32[18]
// INT8:      //   %cache_len {{ +}}step{{ +}}i32[1] = data i32[1]
// INT8-NEXT: // stages:
// INT8-NEXT: //   stage 0: fwd.fused norm_quant covers [0, 1, 2] at {{.*}}llama_layer.mlir:22:3
// INT8-NEXT: //     kernel rms_norm_w_one_word_1x576_b256 grid 1 block 256
// INT8-NEXT: //       reads  %x, %attn_norm_w
// INT8-NEXT: //       writes %h0_q
// INT8-NEXT: //       args   (x=%x, weight=%attn_norm_w, q=%h0_q.q, d=%h0_q.d)
// INT8-NEXT: //   stage 1: fwd.matmul at {{.*}}llama_layer.mlir:24:3
// INT8-NEXT: //     kernel gemv_q8_0_int8_1x576x576_{{.*}} grid {{[0-9x]+}} block {{[0-9]+}}
// INT8-NEXT: //       reads  %wq, %h0_q
// INT8-NEXT: //       writes %q
// INT8:      //   stage 6: fwd.fused attn_output_quant covers [8, 9]
// INT8-NEXT: //     kernel attention_one_word_h9kv3d64_l4096_b128u4s17 grid 153 block 128
// INT8-NEXT: //       reads  %q_r, %k_r, %v, %k_cache, %v_cache, %cache_len, %att_q.part_o, %att_q.part_ml, %att_q.count
// INT8-NEXT: //       writes %att_q, %att_q.part_o, %att_q.part_ml, %att_q.count
// INT8:      //   stage 8: fwd.fused add_norm_quant covers [11, 12, 13, 14]
// INT8-NEXT: //     kernel rms_norm_res_w_sum_one_word_1x576_b256 grid 1 block 256
// INT8-NEXT: //       reads  %x, %o, %ffn_norm_w
// INT8-NEXT: //       writes %h1_q, %x1
// INT8:      //   stage 11: fwd.fused elementwise_chains covers [17, 18]
// INT8-NEXT: //     kernel fused_chain_silu_mul_1536 grid 1 block 256
// INT8-NEXT: //       reads  %g, %u
// INT8-NEXT: //       writes %gu
// INT8-NEXT: //       args   (a0=%g, a1=%u, y0=%gu)
// INT8-NEXT: //   stage 12: fwd.quantize
// INT8-NEXT: //     kernel quantize_one_word_1x1536
// INT8:      //   stage 14: fwd.elementwise
// INT8-NEXT: //     kernel elementwise_add_576
// INT8-NEXT: //       reads  %x1, %d
// INT8-NEXT: //       writes %out
// INT8-NEXT: //       args   (a=%x1, b=%d, y=%out)
// Each norm with its quantize runs as the prologue of the GEMVs that read it
// (Tuning.quantized_prologues); the O projection then runs alone. The ropes run in the Q and K
// GEMVs on each block's rows (Tuning.rope_epilogues), and silu·mul in gate/up, whose groups
// take row i of both (Tuning.pair_epilogues), then the quantize of its result, by the warp
// that completes each block of 32 (Tuning.quant_epilogue_values, its counts %launch3.qcount12): no
// launch keeps a tail, and the down projection has no prologue.
// INT8-NEXT: // launches (5 for 15 stage kernels, then 1 maintenance: the graph's 6):
// INT8-NEXT: //   launch 0: merged_1r3p2e_{{[0-9a-f]+}} grid {{[0-9]+}} block 256 every block first: stage 0 rms_norm_w_one_word_1x576_b256; then holds stage 1 gemv_q8_0_int8_1x576x576_{{.*}}, stage 2 gemv_q8_0_int8_1x192x576_{{.*}}, stage 3 gemv_q8_0_int8_1x192x576_{{.*}}; each block on its rows: stage 4 rope_9x64_h32, stage 5 rope_3x64_h32
// INT8-NEXT: //   launch 1: stage 6 alone: attention_one_word_h9kv3d64_l4096_b128u4s17_pf{{[0-9a-f]+}}; L2 prefetch for launch 2: %wo.qs, %wo.dw
// INT8-NEXT: //   launch 2: stage 7 alone: gemv_q8_0_int8_1x576x576_{{.*}}_pf{{[0-9a-f]+}}; L2 prefetch for launch 3: %ffn_norm_w, %wgate.qs, %wgate.dw, %wup.qs, %wup.dw
// INT8-NEXT: //   launch 3: merged_1r2p2e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid {{[0-9]+}} block 256 every block first: stage 8 rms_norm_res_w_sum_one_word_1x576_b256; then holds stage 9 gemv_q8_0_int8_1x1536x576_{{.*}}, stage 10 gemv_q8_0_int8_1x1536x576_{{.*}}; each block on its rows: stage 11 fused_chain_silu_mul_1536; each 32 values once stored: stage 12 quantize_one_word_1x1536; L2 prefetch for launch 4: %wdown.qs, %wdown.dw
// INT8-NEXT: //   launch 4: merged_1p1e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid {{[0-9]+}} block 256 holds stage 13 gemv_q8_0_int8_1x576x1536_{{.*}}; each block on its rows: stage 14 elementwise_add_576; L2 prefetch for launch 0: %attn_norm_w, %wq.qs, %wq.dw, %wk.qs, %wk.dw, %wv.qs, %wv.dw
// INT8-NEXT: // maintenance (after the last stage, in the graph):
// INT8-NEXT: //   kv_append: each attention's k, v into row %cache_len of its caches
// INT8-NEXT: //     kernel kv_append_1x192_r4095 grid 1 block 256
// INT8-NEXT: //       reads  %k_r, %v, %k_cache, %v_cache, %cache_len
// INT8-NEXT: //       writes %k_cache, %v_cache
// INT8-NEXT: //       args   (k0=%k_r, v0=%v, k_cache0=%k_cache, v_cache0=%v_cache, pos=%cache_len)
// INT8-NOT:  //   stage 15

// DEQ:      // launch plan @decode_step: 14 stages, 6 kernels, 32 buffers
// DEQ-NOT:  qact
// DEQ:      //   stage 0: fwd.fused norm_weight covers [0, 1]
// DEQ-NEXT: //     kernel rms_norm_w_1x576_b256 grid 1 block 256
// DEQ:      //     kernel gemv_q8_0_1x576x576_{{.*}} grid {{[0-9x]+}} block {{[0-9]+}}
// DEQ-NEXT: //       reads  %wq, %h0
// DEQ:      //   stage 6: fwd.attention
// DEQ-NEXT: //     kernel attention_h9kv3d64_l4096_b128u4s17 grid 153 block 128
// DEQ:      //   stage 8: fwd.fused add_norm covers [9, 10, 11]
// DEQ-NEXT: //     kernel rms_norm_res_w_sum_1x576_b256 grid 1 block 256
// DEQ-NEXT: //       reads  %x, %o, %ffn_norm_w
// DEQ-NEXT: //       writes %h1, %x1
// DEQ-NEXT: //       args   (x=%x, residual=%o, weight=%ffn_norm_w, y=%h1, sum=%x1)
// Each launch asks for the next launch's weights into L2 as it starts (codegen.prefetch; the last
// launch for the first's, the next step's).
// Under dequant each norm runs as the prologue of the GEMVs that read it (every block computes it
// into shared memory first; under int8-act the norm with its quantize, and the quantize before the
// down projection, with Tuning.quantized_prologues). The ropes, the silu·mul (gate/up's pair
// epilogue) and the residual add after the down projection are epilogues: each block on its own rows
// (Tuning.binary_epilogues, rope_epilogues, pair_epilogues).
// DEQ:      // launches (5 for 14 stage kernels, then 1 maintenance: the graph's 6):
// DEQ-NEXT: //   launch 0: merged_1r3p2e_{{[0-9a-f]+}} grid {{[0-9]+}} block 256 every block first: stage 0 rms_norm_w_1x576_b256; then holds stage 1 gemv_q8_0_1x576x576_{{.*}}, stage 2 gemv_q8_0_1x192x576_{{.*}}, stage 3 gemv_q8_0_1x192x576_{{.*}}; each block on its rows: stage 4 rope_9x64_h32, stage 5 rope_3x64_h32
// DEQ-NEXT: //   launch 1: stage 6 alone: attention_h9kv3d64_l4096_b128u4s17_pf{{[0-9a-f]+}}; L2 prefetch for launch 2: %wo.qs, %wo.dw
// DEQ-NEXT: //   launch 2: stage 7 alone: gemv_q8_0_1x576x576_{{.*}}_pf{{[0-9a-f]+}}; L2 prefetch for launch 3: %ffn_norm_w, %wgate.qs, %wgate.dw, %wup.qs, %wup.dw
// DEQ-NEXT: //   launch 3: merged_1r2p1e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid {{[0-9]+}} block 256 every block first: stage 8 rms_norm_res_w_sum_1x576_b256; then holds stage 9 gemv_q8_0_1x1536x576_{{.*}}, stage 10 gemv_q8_0_1x1536x576_{{.*}}; each block on its rows: stage 11 fused_chain_silu_mul_1536; L2 prefetch for launch 4: %wdown.qs, %wdown.dw
// DEQ-NEXT: //   launch 4: merged_1p1e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid {{[0-9]+}} block 256 holds stage 12 gemv_q8_0_1x576x1536_{{.*}}; each block on its rows: stage 13 elementwise_add_576; L2 prefetch for launch 0: %attn_norm_w, %wq.qs, %wq.dw, %wk.qs, %wk.dw, %wv.qs, %wv.dw

// TWO:      // launch plan @decode_step: 18 stages, 7 kernels
// TWO:      //   %h0_q {{ +}}intermediate{{ +}}qact.two_words[576] = q i8[576], d f32[18], s f32[18]
// TWO:      //   stage 1: fwd.quantize
// TWO-NEXT: //     kernel quantize_two_words_1x576
// TWO-NEXT: //       reads  %h0
// TWO-NEXT: //       writes %h0_q
// TWO-NEXT: //       args   (x=%h0, q=%h0_q.q, d=%h0_q.d, s=%h0_q.s)
