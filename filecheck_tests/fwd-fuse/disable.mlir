// `fwd-fuse{disable=rule,...}` leaves fusion rules out by name, to bisect a fusion by hand; the
// others run in their order. `forward-shim{disable=...}` passes the names on.
// RUN: fwdshim-opt %s -p 'fwd-fuse' | filecheck %s --check-prefix=ALL
// RUN: fwdshim-opt %s -p 'fwd-fuse{disable=add_norm}' | filecheck %s --check-prefix=NOADD
// RUN: fwdshim-opt %s -p 'forward-shim{disable=add_norm,elementwise_chains}' | filecheck %s --check-prefix=NONE
// RUN: not fwdshim-opt %s -p 'fwd-fuse{disable=add_nrom}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: fwdshim-opt --print-capabilities | filecheck %s --check-prefix=CAPS

// ALL: fwd.fused add_norm
// ALL: fwd.fused elementwise_chains

// NOADD-NOT: fwd.fused add_norm
// NOADD: fwd.rms_norm
// NOADD: fwd.fused elementwise_chains

// NONE-NOT: fwd.fused
// NONE: fwd.numerics

// BAD: fwdshim-opt: error: -p: option `disable` of `fwd-fuse` takes rule names (norm_weight, add_norm, {{.*}}), not `add_nrom`

// CAPS: // capabilities of cuda-forward
// CAPS: // add_norm {{ +}}native {{ +}}native {{ +}}native {{ +}}add_norm
// CAPS: // relu_sqr {{ +}}refuse {{ +}}refuse {{ +}}refuse {{ +}}relu_sqr {{ +}}S01 the forward links no ReLU
// CAPS: //   every numerics: norm_weight, elementwise_regions, elementwise_chains, add_norm,
// CAPS: // int8-act: 12 native, 52 decompose, 22 refuse

func.func @f(%x: tensor<64xf32>, %y: tensor<64xf32>, %z: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.elementwise add %x, %y : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %s : tensor<64xf32> -> tensor<64xf32>
  %t = fwd.elementwise mul %n, %z : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %u = fwd.elementwise add %t, %z : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %u : tensor<64xf32>
}
