func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %w = fwd.weight "blk.0.ffn_up.weight" : !fwd.weight<64x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weight<64x64, q8_0> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
