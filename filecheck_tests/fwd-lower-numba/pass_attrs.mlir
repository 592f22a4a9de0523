// fwd-lower-numba attaches the plan to the IR: the function's totals (kernels: its launches; here the
// norm with its quantize runs as the GEMV's prologue, one launch) and each stage's kernels.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},fwd-lower-numba' | filecheck %s
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},fwd-lower-numba' | fwdshim-opt | filecheck %s

func.func @proj(%x: tensor<576xf32>) -> tensor<576xf32> {
  %nw = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %wq = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %n, %nw : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %q = fwd.matmul %h, %wq : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  func.return %q : tensor<576xf32>
}

// CHECK-LABEL: func.func @proj
// CHECK-SAME:    attributes {fwd.plan = {stages = 2 : i64, kernels = 1 : i64, buffers = 5 : i64}}
// CHECK:         fwd.fused norm_quant covers [0, 1, 2] {{.*}}{fwd.kernels = ["rms_norm_w_one_word_1x576_b256"]}
// CHECK:         fwd.matmul {{.*}} {fwd.kernels = ["gemv_q8_0_int8_1x576x576_{{.*}}"]}
