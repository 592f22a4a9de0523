// The largest finite f32 (FLT_MAX, written 3.4028235e38: past it as a double) in every f32 property:
// valid values, printed back and parsed again (the verifier's message text raised an internal
// OverflowError on them, and --split-input-file ran no later chunk).
// RUN: fwdshim-opt %s | filecheck %s
// RUN: fwdshim-opt %s | fwdshim-opt | filecheck %s

// CHECK-LABEL: func.func @flt_max
// CHECK: fwd.rms_norm %x eps 3.40282347e+38
// CHECK: fwd.layer_norm %x eps 3.40282347e+38
// CHECK: fwd.softcap %x cap 3.40282347e+38
func.func @flt_max(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = fwd.rms_norm %x eps 3.4028235e38 : tensor<64xf32> -> tensor<64xf32>
  %b = fwd.layer_norm %x eps 3.4028235e38 : tensor<64xf32> -> tensor<64xf32>
  %c = fwd.softcap %x cap 3.4028235e38 : tensor<64xf32> -> tensor<64xf32>
  func.return %c : tensor<64xf32>
}
