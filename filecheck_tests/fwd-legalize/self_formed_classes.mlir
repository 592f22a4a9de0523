// B06 (beyond the seed): five classes the forward supports Native are ones it forms itself — its GEMV
// (gemm_dequant_inkernel), its graph (cuda_graphs), a fwd.moe's three kernels (router_topk,
// moe_gate_up_act, moe_down_combine) — so a fwd.fused of one in input IR is refused (the seed's
// `_ => Ok(())` let it through to a lowering that builds no such kernel). A leaf's refusal comes
// first, as for every fused op.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s

// CHECK: self_formed_classes.mlir:[[# @LINE + 2]]:3: error: a fused cuda_graphs — the forward forms that class itself, never from fused parts
func.func @cuda_graphs(%x: tensor<64xf32>) {
  %f = fwd.fused cuda_graphs covers [0] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.silu %a : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// CHECK: self_formed_classes.mlir:[[# @LINE + 3]]:3: error: a fused gemm_dequant_inkernel — the forward forms that class itself, never from fused parts
func.func @gemm(%x: tensor<64xf32>) {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %f = fwd.fused gemm_dequant_inkernel covers [0] ins(%x, %w) : (tensor<64xf32>, !fwd.weights<32x64, q8_0>) -> tensor<32xf32> {
  ^bb0(%a: tensor<64xf32>, %b: !fwd.weights<32x64, q8_0>):
    %y = fwd.matmul %a, %b : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
    fwd.yield %y : tensor<32xf32>
  }
  func.return
}

// -----

// CHECK: self_formed_classes.mlir:[[# @LINE + 2]]:3: error: a fused router_topk — the forward forms that class itself, never from fused parts
func.func @router_topk(%x: tensor<64xf32>) {
  %f = fwd.fused router_topk covers [0] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.softmax %a : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// CHECK: self_formed_classes.mlir:[[# @LINE + 2]]:3: error: a fused moe_gate_up_act — the forward forms that class itself, never from fused parts
func.func @moe_gate_up_act(%x: tensor<64xf32>) {
  %f = fwd.fused moe_gate_up_act covers [0] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.silu %a : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// A refused leaf is the reason first.
// CHECK: self_formed_classes.mlir:[[# @LINE + 2]]:3: error: a soft-capped tensor (`cap C`) — no kernel caps one
func.func @moe_down_combine(%x: tensor<64xf32>) {
  %f = fwd.fused moe_down_combine covers [0] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.softcap %a cap 2.0 : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}
