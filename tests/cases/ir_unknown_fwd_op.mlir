func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %z = "fwd.swish"(%y) : (tensor<64xf32>) -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}
