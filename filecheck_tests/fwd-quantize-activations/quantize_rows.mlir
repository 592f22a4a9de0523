// A Q8_0 projection of rows (operand 0 rank 2) cannot read a !fwd.qact (one vector): a located error
// under the quantized numerics; under dequant nothing is quantized and it passes.
// RUN: not fwdshim-opt %s -p 'fwd-quantize-activations{numerics=int8-act}' 2>&1 | filecheck %s
// RUN: fwdshim-opt %s -p 'fwd-quantize-activations{numerics=dequant}' | filecheck %s --check-prefix=DEQ

func.func @rows(%x: tensor<2x64xf32>, %w: !fwd.weights<32x64, q8_0>) -> tensor<2x32xf32> {
  %y = fwd.matmul %x, %w : tensor<2x64xf32>, !fwd.weights<32x64, q8_0> -> tensor<2x32xf32>
  func.return %y : tensor<2x32xf32>
}

// CHECK: quantize_rows.mlir:7:3: error: fwd.matmul reads operand 0 of shape [2, 64] quantized; a !fwd.qact holds one vector
// CHECK-NOT: Traceback

// DEQ-LABEL: func.func @rows
// DEQ-NEXT:    fwd.matmul %{{.*}}, %{{.*}} : tensor<2x64xf32>
