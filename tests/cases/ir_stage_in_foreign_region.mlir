func.func @f(%x: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %o = "foo.bar"(%n) : (tensor<576xf32>) -> tensor<576xf32>
  %m = fwd.elementwise mul %o, %w : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %q = "foo.baz"(%m) ({
    %z = fwd.silu %m : tensor<576xf32> -> tensor<576xf32>
    %z2 = fwd.rms_norm %z eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
    "foo.yield"(%z2) : (tensor<576xf32>) -> ()
  }) : (tensor<576xf32>) -> tensor<576xf32>
  func.return %q : tensor<576xf32>
}
