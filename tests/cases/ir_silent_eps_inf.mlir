func.func @f(%x: tensor<64xf32>, %w: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rms_norm %x weight(%w : tensor<64xf32>) eps 1.0e999 : tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
