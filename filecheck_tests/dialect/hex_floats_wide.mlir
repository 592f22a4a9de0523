// A hexadecimal float literal of a fwd op's f32 property wider than 32 bits: an error at the literal.
// RUN: not fwdshim-opt %s 2>&1 | filecheck %s

// CHECK: hex_floats_wide.mlir:[[# @LINE + 2]]:28: error: 0x13727C5AC is no f32 bit pattern: a hexadecimal float literal of a fwd op has 8 digits at most
func.func @wide(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = fwd.rms_norm %x eps 0x13727C5AC : tensor<64xf32> -> tensor<64xf32>
  func.return %a : tensor<64xf32>
}
