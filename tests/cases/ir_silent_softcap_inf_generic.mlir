func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = "fwd.softcap"(%x) <{cap = 0x7F800000 : f32}> : (tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
