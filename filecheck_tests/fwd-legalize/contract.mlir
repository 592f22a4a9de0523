// The seed's verdicts: `fits` answers Ok for a block-quantized matmul whatever format it reads its
// activation in (the seed places its quantizes by `activation()` and checks none), so fwd-legalize marks
// and refuses none of these under any numerics. Whether each read matches the contract is checked where
// the numerics are used: the lowering (fwd-lower-numba/contract.mlir) and the reference executor.
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-legalize{numerics=int8-act}' 2>&1 | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-legalize{numerics=two-pass-int8}' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: fwdshim-opt %s --split-input-file -p fwd-legalize 2>&1 | filecheck %s --check-prefix=DEQ
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-legalize{numerics=int8-act mode=mark}' 2>&1 | filecheck %s --check-prefix=MARK
// forward-shim under int8-act, then again under two-pass-int8: the second run refuses the module in one line
// (its activations are int8-act's one_word blocks), before quantizing or fusing anything.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},forward-shim{numerics=two-pass-int8}' --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=AGAIN
// int8-act's quantizes under dequant: one error each, at the quantize (the seed's F04), none at its reader.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},fwd-legalize' --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=BACK

// An f32 activation read by a Q8_0 matmul: the seed's Ok under every numerics.
// BACK: contract.mlir:[[# @LINE + 11]]:3: error: the forward's precise numerics read no activation quantized
// BACK-NEXT: note: the module's activations were quantized for int8-act (its one_word blocks); for dequant run the pipeline on the IR from before that
// BACK-NEXT: ----
// AGAIN: contract.mlir:[[# @LINE + 8]]:3: error: forward-shim{numerics=two-pass-int8}: the module's activations were quantized for int8-act (its one_word blocks, the first here); run the pipeline on the IR from before that, or give it numerics=int8-act
// INT8-NOT: error
// INT8: func.func @f32_reads
// TWO-NOT: error
// TWO: func.func @f32_reads
// MARK-NOT: fwd.refused
func.func @f32_reads(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
// DEQ-NOT: error
// DEQ: func.func @f32_reads

// -----

// A one_word argument: the seed's Ok under every numerics too.
// DEQ-NOT: error
// DEQ: func.func @one_word_reads
// TWO-NOT: error
// TWO: func.func @one_word_reads
func.func @one_word_reads(%q: !fwd.qact<64, one_word>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %q, %w : !fwd.qact<64, one_word>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
// INT8-NOT: error
// INT8: func.func @one_word_reads

// -----

// A dense matmul reads f32 under every numerics (activation() names only the block-quantized ones).
// INT8-NOT: error
// INT8: func.func @dense_reads
// TWO-NOT: error
// TWO: func.func @dense_reads
// MARK-NOT: fwd.refused
func.func @dense_reads(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, f16>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, f16> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
