// The lowering's steps one at a time, each switched by its Tuning option of -t numba (codegen.plan's
// build_plan = prefetch(merge(stage_plan(func)))): stage_plan alone (merge=false prefetch_bytes=0: a
// kernel a stage, no launches section), merge alone (prefetch_bytes=0: what merges with what, the
// epilogues and tails, no hint), prefetch alone (merge=false: every stage launch alone, each given the
// next launch's weights) and both (the default). On the Llama example layer and on a SmolLM2-shaped
// step of two layers (inputs/smollm2_step.mlir: its final norm runs as the last down projection's tail).
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true merge=false prefetch_bytes=0}' | filecheck %s --check-prefix=LSTAGE
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true prefetch_bytes=0}' | filecheck %s --check-prefix=LMERGE
// RUN: fwdshim-opt %S/../../examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true merge=false}' | filecheck %s --check-prefix=LPF
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true merge=false prefetch_bytes=0}' | filecheck %s --check-prefix=SSTAGE
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true prefetch_bytes=0}' | filecheck %s --check-prefix=SMERGE
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true merge=false}' | filecheck %s --check-prefix=SPF
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=int8-act}' -t 'numba{plan_only=true}' | filecheck %s --check-prefix=SALL
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=dequant}' -t 'numba{plan_only=true prefetch_bytes=0}' | filecheck %s --check-prefix=DMERGE
// RUN: fwdshim-opt %S/inputs/smollm2_step.mlir -p 'forward-shim{numerics=dequant}' -t 'numba{plan_only=true}' | filecheck %s --check-prefix=DALL

// stage_plan: one kernel a stage, then kv_append; no merged launch, no prefetch hint.
// LSTAGE:     // launch plan @decode_step: 15 stages, 16 kernels, 33 buffers
// LSTAGE:     //   stage 13: fwd.matmul at {{.*}}llama_layer.mlir:40:3
// LSTAGE-NEXT://     kernel gemv_q8_0_int8_1x576x1536_v16r2w8u1s4 grid {{[0-9x]+}} block 256
// LSTAGE:     //   stage 14: fwd.elementwise at {{.*}}llama_layer.mlir:41:3
// LSTAGE-NEXT://     kernel elementwise_add_576 grid
// LSTAGE-NOT: // launches
// LSTAGE-NOT: _pf
// LSTAGE:     // maintenance (after the last stage, in the graph):
// LSTAGE-NOT: _pf

// merge alone: the norm with its quantize as the QKV GEMVs' prologue and the ropes on their rows;
// silu·mul on gate/up's paired rows, then its quantize; the residual add as the down GEMV's epilogue.
// LMERGE:      // launch plan @decode_step: 15 stages, 6 kernels, 34 buffers
// LMERGE:      // launches (5 for 15 stage kernels, then 1 maintenance: the graph's 6):
// LMERGE-NEXT: //   launch 0: merged_1r3p2e_{{[0-9a-f]+}} grid 60 block 256 every block first: stage 0 rms_norm_w_one_word_1x576_b256; then holds stage 1 gemv_q8_0_int8_1x576x576_v16r2w8u1s1, stage 2 gemv_q8_0_int8_1x192x576_v16r2w8u1s1, stage 3 gemv_q8_0_int8_1x192x576_v16r2w8u1s1; each block on its rows: stage 4 rope_9x64_h32, stage 5 rope_3x64_h32{{$}}
// LMERGE-NEXT: //   launch 1: stage 6 alone: attention_one_word_h9kv3d64_l4096_b128u4s17{{$}}
// LMERGE-NEXT: //   launch 2: stage 7 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1{{$}}
// LMERGE-NEXT: //   launch 3: merged_1r2p2e_{{[0-9a-f]+}} grid 192 block 256 every block first: stage 8 rms_norm_res_w_sum_one_word_1x576_b256; then holds stage 9 gemv_q8_0_int8_1x1536x576_v16r2w8u1s1, stage 10 gemv_q8_0_int8_1x1536x576_v16r2w8u1s1; each block on its rows: stage 11 fused_chain_silu_mul_1536; each 32 values once stored: stage 12 quantize_one_word_1x1536{{$}}
// LMERGE-NEXT: //   launch 4: merged_1p1e_{{[0-9a-f]+}} grid 144 block 256 holds stage 13 gemv_q8_0_int8_1x576x1536_v16r2w8u1s4; each block on its rows: stage 14 elementwise_add_576{{$}}
// LMERGE-NEXT: // maintenance (after the last stage, in the graph):

// prefetch alone: each stage launch hints the next launch's weights (the ropes and silu·mul read none,
// so the launch before them hints nothing); the last hints the first's, for the next replay.
// LPF:      // launches (15 for 15 stage kernels, then 1 maintenance: the graph's 16):
// LPF-NEXT: //   launch 0: stage 0 alone: rms_norm_w_one_word_1x576_b256_pf{{[0-9a-f]+}}; L2 prefetch for launch 1: %wq.qs, %wq.dw
// LPF-NEXT: //   launch 1: stage 1 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 2: %wk.qs, %wk.dw
// LPF-NEXT: //   launch 2: stage 2 alone: gemv_q8_0_int8_1x192x576_v16r2w8u1s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 3: %wv.qs, %wv.dw
// LPF-NEXT: //   launch 3: stage 3 alone: gemv_q8_0_int8_1x192x576_v16r2w8u1s1{{$}}
// LPF-NEXT: //   launch 4: stage 4 alone: rope_9x64_h32{{$}}
// LPF-NEXT: //   launch 5: stage 5 alone: rope_3x64_h32{{$}}
// LPF-NEXT: //   launch 6: stage 6 alone: attention_one_word_h9kv3d64_l4096_b128u4s17_pf{{[0-9a-f]+}}; L2 prefetch for launch 7: %wo.qs, %wo.dw
// LPF-NEXT: //   launch 7: stage 7 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 8: %ffn_norm_w
// LPF-NEXT: //   launch 8: stage 8 alone: rms_norm_res_w_sum_one_word_1x576_b256_pf{{[0-9a-f]+}}; L2 prefetch for launch 9: %wgate.qs, %wgate.dw
// LPF-NEXT: //   launch 9: stage 9 alone: gemv_q8_0_int8_1x1536x576_v16r2w8u1s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 10: %wup.qs, %wup.dw
// LPF-NEXT: //   launch 10: stage 10 alone: gemv_q8_0_int8_1x1536x576_v16r2w8u1s1{{$}}
// LPF-NEXT: //   launch 11: stage 11 alone: fused_chain_silu_mul_1536{{$}}
// LPF-NEXT: //   launch 12: stage 12 alone: quantize_one_word_1x1536_pf{{[0-9a-f]+}}; L2 prefetch for launch 13: %wdown.qs, %wdown.dw
// LPF-NEXT: //   launch 13: stage 13 alone: gemv_q8_0_int8_1x576x1536_v16r2w8u1s4{{$}}
// LPF-NEXT: //   launch 14: stage 14 alone: elementwise_add_576_pf{{[0-9a-f]+}}; L2 prefetch for launch 0: %attn_norm_w
// LPF-NEXT: // maintenance (after the last stage, in the graph):

// The SmolLM2-shaped step: 30 stages (two layers, the final norm, the tied output projection).
// SSTAGE:     // launch plan @decode_step: 30 stages, 31 kernels, 66 buffers
// SSTAGE:     //   stage 28: fwd.fused add_norm_quant
// SSTAGE-NEXT://     kernel rms_norm_res_w_one_word_1x576_b256 grid 1 block 256
// SSTAGE:     //   stage 29: fwd.matmul
// SSTAGE-NEXT://     kernel gemv_q8_0_int8_1x49152x576_r2w4u2s1 grid
// SSTAGE-NOT: // launches
// SSTAGE-NOT: _pf

// Merging: the second layer's norm is the prologue of its QKV GEMVs; the last down projection keeps the
// final norm as its tail (the last block runs it), so the output projection follows alone.
// SMERGE:      // launches (11 for 30 stage kernels, then 1 maintenance: the graph's 12):
// SMERGE-NEXT: //   launch 0: merged_1r3p2e_{{[0-9a-f]+}} grid 60 block 256 every block first: stage 0 rms_norm_w_one_word_1x576_b256; then holds stage 1 {{.*}}; each block on its rows: stage 4 rope_9x64_h32, stage 5 rope_3x64_h32{{$}}
// SMERGE-NEXT: //   launch 1: stage 6 alone: attention_one_word_h9kv3d64_l4096_b128u4s17{{$}}
// SMERGE-NEXT: //   launch 2: stage 7 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1{{$}}
// SMERGE-NEXT: //   launch 3: merged_1r2p2e_[[GATEUP:[0-9a-f]+]] grid 192 block 256 every block first: stage 8 rms_norm_res_w_sum_one_word_1x576_b256; then holds stage 9 {{.*}}, stage 10 {{.*}}; each block on its rows: stage 11 fused_chain_silu_mul_1536; each 32 values once stored: stage 12 quantize_one_word_1x1536{{$}}
// SMERGE-NEXT: //   launch 4: stage 13 alone: gemv_q8_0_int8_1x576x1536_v16r2w8u1s4{{$}}
// SMERGE-NEXT: //   launch 5: merged_1r3p2e_{{[0-9a-f]+}} grid 60 block 256 every block first: stage 14 rms_norm_res_w_sum_one_word_1x576_b256; then holds stage 15 {{.*}}; each block on its rows: stage 18 rope_9x64_h32, stage 19 rope_3x64_h32{{$}}
// SMERGE-NEXT: //   launch 6: stage 20 alone: attention_one_word_h9kv3d64_l4096_b128u4s17{{$}}
// SMERGE-NEXT: //   launch 7: stage 21 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1{{$}}
// SMERGE-NEXT: //   launch 8: merged_1r2p2e_[[GATEUP]] grid 192 block 256 every block first: stage 22 {{.*}}; each 32 values once stored: stage 26 quantize_one_word_1x1536{{$}}
// SMERGE-NEXT: //   launch 9: merged_1p1t_{{[0-9a-f]+}} grid 144 block 256 holds stage 27 gemv_q8_0_int8_1x576x1536_v16r2w8u1s4; last block: stage 28 rms_norm_res_w_one_word_1x576_b256{{$}}
// SMERGE-NEXT: //   launch 10: stage 29 alone: gemv_q8_0_int8_1x49152x576_r2w4u2s1{{$}}
// SMERGE-NEXT: // maintenance (after the last stage, in the graph):
// SMERGE-NEXT: //   kv_append: each attention's k, v into row %cache_len of its caches
// SMERGE-NEXT: //     kernel kv_append_2x192_r4095 grid 2 block 256

// Prefetch alone on the step: the last down projection hints the final norm's weight; the final norm
// hints nothing (the output matrix, 29 MB, is past the 8 MiB a launch asks for); the output projection
// (the last launch) hints the first layer's norm weight for the next replay.
// SPF:      // launches (30 for 30 stage kernels, then 1 maintenance: the graph's 31):
// SPF:      //   launch 27: stage 27 alone: gemv_q8_0_int8_1x576x1536_v16r2w8u1s4_pf{{[0-9a-f]+}}; L2 prefetch for launch 28: %out_w
// SPF-NEXT: //   launch 28: stage 28 alone: rms_norm_res_w_one_word_1x576_b256{{$}}
// SPF-NEXT: //   launch 29: stage 29 alone: gemv_q8_0_int8_1x49152x576_r2w4u2s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 0: %l0_attn_in_w

// Both: the merged launches given the next merged launch's weights: the launch before a merged launch
// hints all of its weights (the prologue's norm weight and the set's matrices).
// SALL:      // launches (11 for 30 stage kernels, then 1 maintenance: the graph's 12):
// SALL:      //   launch 2: stage 7 alone: gemv_q8_0_int8_1x576x576_v16r2w8u1s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 3: %l0_ffn_in_w, %l0_gate_w.qs, %l0_gate_w.dw, %l0_up_w.qs, %l0_up_w.dw
// SALL-NEXT: //   launch 3: merged_1r2p2e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid 192 block 256 {{.*}}; L2 prefetch for launch 4: %l0_down_w.qs, %l0_down_w.dw
// SALL-NEXT: //   launch 4: stage 13 alone: gemv_q8_0_int8_1x576x1536_v16r2w8u1s4_pf{{[0-9a-f]+}}; L2 prefetch for launch 5: %l1_attn_in_w, %l1_q_w.qs, %l1_q_w.dw, %l1_k_w.qs, %l1_k_w.dw, %l1_v_w.qs, %l1_v_w.dw
// SALL:      //   launch 9: merged_1p1t_{{[0-9a-f]+}} grid 144 block 256 holds stage 27 {{.*}}; last block: stage 28 rms_norm_res_w_one_word_1x576_b256{{$}}
// SALL-NEXT: //   launch 10: stage 29 alone: gemv_q8_0_int8_1x49152x576_r2w4u2s1_pf{{[0-9a-f]+}}; L2 prefetch for launch 0: %l0_attn_in_w, %l0_q_w.qs, %l0_q_w.dw, %l0_k_w.qs, %l0_k_w.dw, %l0_v_w.qs, %l0_v_w.dw

// Dequant: no quantizes, so gate/up's launch ends with silu·mul; the same tail.
// DMERGE:      // launches (11 for 28 stage kernels, then 1 maintenance: the graph's 12):
// DMERGE:      //   launch 3: merged_1r2p1e_{{[0-9a-f]+}} grid 384 block 256 every block first: stage 8 rms_norm_res_w_sum_1x576_b256; then holds stage 9 gemv_q8_0_1x1536x576_v16r4w8u1s4, stage 10 gemv_q8_0_1x1536x576_v16r4w8u1s4; each block on its rows: stage 11 fused_chain_silu_mul_1536{{$}}
// DMERGE:      //   launch 9: merged_1p1t_{{[0-9a-f]+}} grid 72 block 256 holds stage 25 gemv_q8_0_1x576x1536_v16r4w8u1s4; last block: stage 26 rms_norm_res_w_1x576_b256{{$}}
// DMERGE-NEXT: //   launch 10: stage 27 alone: gemv_q8_0_1x49152x576_v16r4w4u1s1{{$}}
// DMERGE-NOT:  L2 prefetch
// DALL:        //   launch 8: merged_1r2p1e_{{[0-9a-f]+}}_pf{{[0-9a-f]+}} grid 384 block 256 {{.*}}; L2 prefetch for launch 9: %l1_down_w.qs, %l1_down_w.dw, %out_w
// DALL-NEXT:   //   launch 9: merged_1p1t_{{[0-9a-f]+}} grid 72 block 256 holds stage 25 {{.*}}; last block: stage 26 rms_norm_res_w_1x576_b256{{$}}
