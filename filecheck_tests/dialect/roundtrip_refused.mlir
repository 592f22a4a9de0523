// The 19 primitives the forward never computes (refused by legality, so a larger compiler's IR
// parses): any operands and results, `access` and `into`; custom form, generic form and back.
// RUN: fwdshim-opt %s | filecheck %s
// RUN: fwdshim-opt %s | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt --print-op-generic | filecheck %s --check-prefix=GENERIC
// Stock xdsl-opt sees the dialect through the `xdsl.universe` entry point:
// RUN: xdsl-opt %s | filecheck %s

func.func @refused(%a: tensor<1536xf32>, %b: tensor<1536xf32>, %x: tensor<576xf32>, %heads: tensor<9x64xf32>, %ids: tensor<4xi32>, %table: tensor<49152x576xf32>, %i8: tensor<576xi8>) {
  %swiglu = fwd.swiglu %a, %b : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
  %sigmoid = fwd.sigmoid %x : (tensor<576xf32>) -> tensor<576xf32>
  %gelu = fwd.gelu %a : (tensor<1536xf32>) -> tensor<1536xf32>
  %scale = fwd.scale %x : (tensor<576xf32>) -> tensor<576xf32>
  %decay = fwd.decay %x, %x : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
  %l2 = fwd.l2_norm %heads : (tensor<9x64xf32>) -> tensor<9x64xf32>
  %hs = fwd.head_slice %heads : (tensor<9x64xf32>) -> tensor<3x64xf32>
  %join = fwd.join %x, %x : (tensor<576xf32>, tensor<576xf32>) -> tensor<1152xf32>
  %hm = fwd.head_matmul %heads, %heads : (tensor<9x64xf32>, tensor<9x64xf32>) -> tensor<9x9xf32>
  %conv = fwd.causal_conv %a, %b : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
  %fa = fwd.full_attention %x, %x, %x : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
  %rg = fwd.row_gather %table, %ids : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
  %rsg = fwd.rows_gather %table, %ids : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
  %am = fwd.argmax %x : (tensor<576xf32>) -> tensor<1xi32>
  %sr = fwd.set_row %table, %x access [#fwd.access<rows>, #fwd.access<whole>] into "token_embd" : (tensor<49152x576xf32>, tensor<576xf32>) -> tensor<49152x576xf32>
  %ir = fwd.int_requant %i8 : (tensor<576xi8>) -> tensor<576xi8>
  %ic = fwd.int_clamp %i8 : (tensor<576xi8>) -> tensor<576xi8>
  %relu = fwd.relu %x : (tensor<576xf32>) -> tensor<576xf32>
  %lut, %lse = fwd.lut_attention %x, %heads : (tensor<576xf32>, tensor<9x64xf32>) -> (tensor<576xf32>, tensor<9xf32>)
  "test.op"(%swiglu, %sigmoid, %gelu, %scale, %decay, %l2, %hs, %join, %hm, %conv, %fa, %rg, %rsg, %am, %sr, %ir, %ic, %relu, %lut, %lse) : (tensor<1536xf32>, tensor<576xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<3x64xf32>, tensor<1152xf32>, tensor<9x9xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<4x576xf32>, tensor<4x576xf32>, tensor<1xi32>, tensor<49152x576xf32>, tensor<576xi8>, tensor<576xi8>, tensor<576xf32>, tensor<576xf32>, tensor<9xf32>) -> ()
  func.return
}

// CHECK-LABEL: func.func @refused(%a: tensor<1536xf32>, %b: tensor<1536xf32>, %x: tensor<576xf32>, %heads: tensor<9x64xf32>, %ids: tensor<4xi32>, %table: tensor<49152x576xf32>, %i8: tensor<576xi8>) {
// CHECK-NEXT: %swiglu = fwd.swiglu %a, %b : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
// CHECK-NEXT: %sigmoid = fwd.sigmoid %x : (tensor<576xf32>) -> tensor<576xf32>
// CHECK-NEXT: %gelu = fwd.gelu %a : (tensor<1536xf32>) -> tensor<1536xf32>
// CHECK-NEXT: %scale = fwd.scale %x : (tensor<576xf32>) -> tensor<576xf32>
// CHECK-NEXT: %decay = fwd.decay %x, %x : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// CHECK-NEXT: %l2 = fwd.l2_norm %heads : (tensor<9x64xf32>) -> tensor<9x64xf32>
// CHECK-NEXT: %hs = fwd.head_slice %heads : (tensor<9x64xf32>) -> tensor<3x64xf32>
// CHECK-NEXT: %join = fwd.join %x, %x : (tensor<576xf32>, tensor<576xf32>) -> tensor<1152xf32>
// CHECK-NEXT: %hm = fwd.head_matmul %heads, %heads : (tensor<9x64xf32>, tensor<9x64xf32>) -> tensor<9x9xf32>
// CHECK-NEXT: %conv = fwd.causal_conv %a, %b : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
// CHECK-NEXT: %fa = fwd.full_attention %x, %x, %x : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// CHECK-NEXT: %rg = fwd.row_gather %table, %ids : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
// CHECK-NEXT: %rsg = fwd.rows_gather %table, %ids : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
// CHECK-NEXT: %am = fwd.argmax %x : (tensor<576xf32>) -> tensor<1xi32>
// CHECK-NEXT: %sr = fwd.set_row %table, %x access [#fwd.access<rows>, #fwd.access<whole>] into "token_embd" : (tensor<49152x576xf32>, tensor<576xf32>) -> tensor<49152x576xf32>
// CHECK-NEXT: %ir = fwd.int_requant %i8 : (tensor<576xi8>) -> tensor<576xi8>
// CHECK-NEXT: %ic = fwd.int_clamp %i8 : (tensor<576xi8>) -> tensor<576xi8>
// CHECK-NEXT: %relu = fwd.relu %x : (tensor<576xf32>) -> tensor<576xf32>
// CHECK-NEXT: %lut, %lse = fwd.lut_attention %x, %heads : (tensor<576xf32>, tensor<9x64xf32>) -> (tensor<576xf32>, tensor<9xf32>)
// CHECK-NEXT: "test.op"(%swiglu, %sigmoid, %gelu, %scale, %decay, %l2, %hs, %join, %hm, %conv, %fa, %rg, %rsg, %am, %sr, %ir, %ic, %relu, %lut, %lse) : (tensor<1536xf32>, tensor<576xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<3x64xf32>, tensor<1152xf32>, tensor<9x9xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<4x576xf32>, tensor<4x576xf32>, tensor<1xi32>, tensor<49152x576xf32>, tensor<576xi8>, tensor<576xi8>, tensor<576xf32>, tensor<576xf32>, tensor<9xf32>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "refused", function_type = (tensor<1536xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<4xi32>, tensor<49152x576xf32>, tensor<576xi8>) -> ()}> ({
// GENERIC-NEXT: ^bb0(%a: tensor<1536xf32>, %b: tensor<1536xf32>, %x: tensor<576xf32>, %heads: tensor<9x64xf32>, %ids: tensor<4xi32>, %table: tensor<49152x576xf32>, %i8: tensor<576xi8>):
// GENERIC-NEXT: %swiglu = "fwd.swiglu"(%a, %b) : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
// GENERIC-NEXT: %sigmoid = "fwd.sigmoid"(%x) : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %gelu = "fwd.gelu"(%a) : (tensor<1536xf32>) -> tensor<1536xf32>
// GENERIC-NEXT: %scale = "fwd.scale"(%x) : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %decay = "fwd.decay"(%x, %x) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %l2 = "fwd.l2_norm"(%heads) : (tensor<9x64xf32>) -> tensor<9x64xf32>
// GENERIC-NEXT: %hs = "fwd.head_slice"(%heads) : (tensor<9x64xf32>) -> tensor<3x64xf32>
// GENERIC-NEXT: %join = "fwd.join"(%x, %x) : (tensor<576xf32>, tensor<576xf32>) -> tensor<1152xf32>
// GENERIC-NEXT: %hm = "fwd.head_matmul"(%heads, %heads) : (tensor<9x64xf32>, tensor<9x64xf32>) -> tensor<9x9xf32>
// GENERIC-NEXT: %conv = "fwd.causal_conv"(%a, %b) : (tensor<1536xf32>, tensor<1536xf32>) -> tensor<1536xf32>
// GENERIC-NEXT: %fa = "fwd.full_attention"(%x, %x, %x) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %rg = "fwd.row_gather"(%table, %ids) : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
// GENERIC-NEXT: %rsg = "fwd.rows_gather"(%table, %ids) : (tensor<49152x576xf32>, tensor<4xi32>) -> tensor<4x576xf32>
// GENERIC-NEXT: %am = "fwd.argmax"(%x) : (tensor<576xf32>) -> tensor<1xi32>
// GENERIC-NEXT: %sr = "fwd.set_row"(%table, %x) <{access = [#fwd.access<rows>, #fwd.access<whole>], into = "token_embd"}> : (tensor<49152x576xf32>, tensor<576xf32>) -> tensor<49152x576xf32>
// GENERIC-NEXT: %ir = "fwd.int_requant"(%i8) : (tensor<576xi8>) -> tensor<576xi8>
// GENERIC-NEXT: %ic = "fwd.int_clamp"(%i8) : (tensor<576xi8>) -> tensor<576xi8>
// GENERIC-NEXT: %relu = "fwd.relu"(%x) : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %lut, %lse = "fwd.lut_attention"(%x, %heads) : (tensor<576xf32>, tensor<9x64xf32>) -> (tensor<576xf32>, tensor<9xf32>)
// GENERIC-NEXT: "test.op"(%swiglu, %sigmoid, %gelu, %scale, %decay, %l2, %hs, %join, %hm, %conv, %fa, %rg, %rsg, %am, %sr, %ir, %ic, %relu, %lut, %lse) : (tensor<1536xf32>, tensor<576xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<3x64xf32>, tensor<1152xf32>, tensor<9x9xf32>, tensor<1536xf32>, tensor<576xf32>, tensor<4x576xf32>, tensor<4x576xf32>, tensor<1xi32>, tensor<49152x576xf32>, tensor<576xi8>, tensor<576xi8>, tensor<576xf32>, tensor<576xf32>, tensor<9xf32>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @no_operands() -> tensor<4xf32> {
  %r = fwd.relu : () -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @no_operands() -> tensor<4xf32> {
// CHECK-NEXT: %r = fwd.relu : () -> tensor<4xf32>
// CHECK-NEXT: func.return %r : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "no_operands", function_type = () -> tensor<4xf32>}> ({
// GENERIC-NEXT: %r = "fwd.relu"() : () -> tensor<4xf32>
// GENERIC-NEXT: "func.return"(%r) : (tensor<4xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC-NEXT: }) : () -> ()
