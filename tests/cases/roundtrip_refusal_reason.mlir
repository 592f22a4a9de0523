func.func @f(%x: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rms_norm %x bias(%b : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
  %z = fwd.silu %y into "état" : tensor<64xf32> -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}
