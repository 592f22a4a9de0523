// A hexadecimal literal for a fwd op's f32 property is the f32's bit pattern, in the custom form as in
// the generic one (MLIR's rule): `eps 0x3727C5AC` is 1e-05. The custom form refused it ("Expected float
// literal") while the generic form read the bits. One of more than 32 bits is an error at it
// (hex_floats_wide.mlir).
// RUN: fwdshim-opt %s --split-input-file | filecheck %s
// RUN: fwdshim-opt %s --split-input-file --print-op-generic | fwdshim-opt --split-input-file | filecheck %s

// CHECK-LABEL: func.func @custom
// CHECK: fwd.rms_norm %x eps 1.000000e-05
// CHECK: fwd.softcap %a cap 3.000000e+01
func.func @custom(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = fwd.rms_norm %x eps 0x3727C5AC : tensor<64xf32> -> tensor<64xf32>
  %b = fwd.softcap %a cap 0x41F00000 : tensor<64xf32> -> tensor<64xf32>
  func.return %b : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @generic
// CHECK: fwd.softcap %x cap 3.000000e+01
func.func @generic(%x: tensor<64xf32>) -> tensor<64xf32> {
  %b = "fwd.softcap"(%x) <{cap = 0x41F00000 : f32}> : (tensor<64xf32>) -> tensor<64xf32>
  func.return %b : tensor<64xf32>
}

