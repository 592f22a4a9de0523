// A refused op is reported at the file location its written `loc(...)` holds, found as MLIR's source
// manager finds it: a name's child, a call site's callee, a fused location's first file location. A
// written location that names no file (a bare name) reports where the op was parsed, with its line.
// They all said `<unknown> %y` before.
// RUN: not fwdshim-opt %s -p fwd-legalize 2>&1 | filecheck %s
// RUN: fwdshim-opt %s -p 'fwd-legalize{mode=mark}' --explain | filecheck %s --check-prefix=EXPLAIN

// CHECK: model.py:12:5: error: a rope with a table row per row of the query
// CHECK: layer.py:7:9: error: a rope with a table row per row of the query
// CHECK: attn.py:40:2: error: a rope with a table row per row of the query
// CHECK: locations.mlir:[[# @LINE + 17]]:3: error: a rope with a table row per row of the query
// CHECK-NEXT: %r4 = fwd.rope
// CHECK-NEXT: ^
// CHECK-NOT: <unknown>

// EXPLAIN: // 0 {{ +}}fwd.rope {{ +}}model.py:12:5
// EXPLAIN: // 1 {{ +}}fwd.silu {{ +}}model.py:20:3
// EXPLAIN: // 2 {{ +}}fwd.rope {{ +}}layer.py:7:9
// EXPLAIN: // 3 {{ +}}fwd.rope {{ +}}attn.py:40:2
// EXPLAIN: // 4 {{ +}}fwd.rope {{ +}}{{.*}}locations.mlir:[[# @LINE + 8]]:3
// EXPLAIN-NOT: <unknown>

func.func @f(%x: tensor<64xf32>, %ang: tensor<2x16xf32>) -> tensor<64xf32> {
  %r1 = fwd.rope %x, %ang hd 32 half 16 rows 2 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32> loc(fused["model.py":12:5, "layer.py":3:1])
  %s = fwd.silu %r1 : tensor<64xf32> -> tensor<64xf32> loc("q_proj"("model.py":20:3))
  %r2 = fwd.rope %s, %ang hd 32 half 16 rows 2 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32> loc("k_proj"("layer.py":7:9))
  %r3 = fwd.rope %r2, %ang hd 32 half 16 rows 2 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32> loc(callsite("attn.py":40:2 at "model.py":99:1))
  %r4 = fwd.rope %r3, %ang hd 32 half 16 rows 2 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32> loc("just_a_name")
  func.return %r4 : tensor<64xf32>
}
