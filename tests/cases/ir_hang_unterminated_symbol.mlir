func.func @"forward_step_with_a_long_quoted_name(%x: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
