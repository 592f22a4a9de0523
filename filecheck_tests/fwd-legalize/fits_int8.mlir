// fits under numerics=int8-act: attn_output_quant (F08), the producer-quant classes native, quantized reads (B04).
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=int8-act}' | filecheck %s

// F08: heads of 48 values are not whole 32-value blocks
// CHECK: fits_int8.mlir:[[# @LINE + 2]]:3: error: the forward's attention quantizes its result only where each head's values are whole 32-value blocks
func.func @attn_output_quant_hd48(%q: tensor<96xf32>, %k: tensor<48xf32>, %v: tensor<48xf32>, %kc: tensor<3x48xf32>, %vc: tensor<3x48xf32>) {
  %f = fwd.fused attn_output_quant covers [0, 1] ins(%q, %k, %v, %kc, %vc) : (tensor<96xf32>, tensor<48xf32>, tensor<48xf32>, tensor<3x48xf32>, tensor<3x48xf32>) -> !fwd.qact<96, one_word> {
  ^bb0(%q_: tensor<96xf32>, %k_: tensor<48xf32>, %v_: tensor<48xf32>, %kc_: tensor<3x48xf32>, %vc_: tensor<3x48xf32>):
    %a = fwd.attention %q_, %k_, %v_, %kc_, %vc_ h 2 kv 1 hd 48 vd 48 l 4 rows 1 : tensor<96xf32>, tensor<48xf32>, tensor<48xf32>, tensor<3x48xf32>, tensor<3x48xf32> -> tensor<96xf32>
    %aq = fwd.quantize %a one_word : tensor<96xf32> -> !fwd.qact<96, one_word>
    fwd.yield %aq : !fwd.qact<96, one_word>
  }
  func.return
}

// -----

// B04 (beyond the seed): only a block-quantized matmul and a mixture read int8 blocks
// CHECK: fits_int8.mlir:[[# @LINE + 3]]:3: error: `fwd.rms_norm` reading a quantized activation — only a block-quantized matmul's and a mixture's kernels read int8 blocks, as their input
func.func @norm_reads_qact(%x: tensor<64xf32>) {
  %q = fwd.quantize %x one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
  %z = fwd.rms_norm %q : !fwd.qact<64, one_word> -> tensor<64xf32>
  func.return
}

// -----

// B04: a matmul over F16 rows reads no int8 blocks
// CHECK: fits_int8.mlir:[[# @LINE + 4]]:3: error: `fwd.matmul` reading a quantized activation — only a block-quantized matmul's and a mixture's kernels read int8 blocks, as their input
func.func @f16_matmul_reads_qact(%x: tensor<64xf32>) {
  %q = fwd.quantize %x one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
  %w = fwd.weight "w" : !fwd.weights<32x64, f16>
  %z = fwd.matmul %q, %w : !fwd.qact<64, one_word>, !fwd.weights<32x64, f16> -> tensor<32xf32>
  func.return
}

// -----

// under int8-act: attn_output_quant with hd 64 and norm_quant are native kernels; a Q8_0 matmul reads the int8 blocks
// CHECK: fwd.numerics = {shim = "cuda-forward:Int8Act", point = "the older forward: Int8Act activations", activations = "int8 blocks of 32, one_word"
// CHECK-LABEL: func.func @fits_int8
// CHECK: fwd.fused attn_output_quant covers [0, 1]
// CHECK: fwd.fused norm_quant covers [3, 4]
// CHECK: fwd.matmul %g, %w
// CHECK-NOT: error
func.func @fits_int8(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<3x64xf32>, %vc: tensor<3x64xf32>, %x: tensor<64xf32>) {
  %f = fwd.fused attn_output_quant covers [0, 1] ins(%q, %k, %v, %kc, %vc) : (tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<3x64xf32>, tensor<3x64xf32>) -> !fwd.qact<128, one_word> {
  ^bb0(%q_: tensor<128xf32>, %k_: tensor<64xf32>, %v_: tensor<64xf32>, %kc_: tensor<3x64xf32>, %vc_: tensor<3x64xf32>):
    %a = fwd.attention %q_, %k_, %v_, %kc_, %vc_ h 2 kv 1 hd 64 vd 64 l 4 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<3x64xf32>, tensor<3x64xf32> -> tensor<128xf32>
    %aq = fwd.quantize %a one_word : tensor<128xf32> -> !fwd.qact<128, one_word>
    fwd.yield %aq : !fwd.qact<128, one_word>
  }
  %g = fwd.fused norm_quant covers [3, 4] ins(%x) : (tensor<64xf32>) -> !fwd.qact<64, one_word> {
  ^bb0(%x_: tensor<64xf32>):
    %n = fwd.rms_norm %x_ eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    %nq = fwd.quantize %n one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
    fwd.yield %nq : !fwd.qact<64, one_word>
  }
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %z = fwd.matmul %g, %w : !fwd.qact<64, one_word>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return
}
