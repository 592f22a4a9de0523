// forward-shim is strict: an op the forward refuses fails the pipeline with its located reason;
// an unknown numerics is a one-line error, never a traceback.
// RUN: not fwdshim-opt %s -p 'forward-shim{numerics=int8-act}' 2>&1 | filecheck %s
// RUN: not fwdshim-opt %s -p 'forward-shim{numerics=int4}' 2>&1 | filecheck %s --check-prefix=NUMERICS
// RUN: fwdshim-opt %s -p 'fwd-quantize-activations{numerics=int8-act},fwd-fuse{numerics=int8-act}' | filecheck %s --check-prefix=FUSED

func.func @refused(%x: tensor<64xf32>, %a: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.elementwise add %x, %a : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %c = fwd.softcap %s cap 3.0e+01 : tensor<64xf32> -> tensor<64xf32>
  %y = fwd.elementwise mul %c, %a : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK: errors.mlir:9:{{[0-9]+}}: error: a soft-capped tensor (`cap C`) — no kernel caps one
// CHECK-NOT: Traceback

// NUMERICS: fwdshim-opt: error: -p: option `numerics` of `forward-shim` takes dequant, int8-act or two-pass-int8, not `int4`
// NUMERICS-NOT: Traceback

// The refused soft cap splits the run: the add and the multiply are not one chain through it.
// FUSED-LABEL: func.func @refused
// FUSED-NOT:     fwd.fused
// FUSED:         fwd.softcap
