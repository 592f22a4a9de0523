// B12: a block-quantized matmul or a mixture reads its activation as the numerics' contract says
// (`activation()`: f32 under dequant, one_word under int8-act, two_words under two-pass-int8). IR that
// skipped fwd-quantize-activations, was quantized under other numerics, or reads a quantized argument
// under dequant passed legality, and the plan ran other numerics than its `fwd.numerics` contract said.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=int8-act}' 2>&1 | filecheck %s --check-prefix=INT8
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=two-pass-int8}' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize 2>&1 | filecheck %s --check-prefix=DEQ
// forward-shim under int8-act, then again under two-pass-int8: the second run refuses the module in one line
// (its activations are int8-act's one_word blocks), before quantizing or fusing anything.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},forward-shim{numerics=two-pass-int8}' --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=AGAIN
// int8-act's quantizes under dequant: one error each, at the quantize (the seed's F04), none at its reader.
// RUN: fwdshim-opt %s -p 'forward-shim{numerics=int8-act},fwd-legalize' --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=BACK

// An f32 activation: legal under dequant only.
// BACK: contract.mlir:[[# @LINE + 8]]:3: error: the forward's precise numerics read no activation quantized
// BACK-NEXT: note: the module's activations were quantized for int8-act (its one_word blocks); for dequant run the pipeline on the IR from before that
// BACK-NEXT: ----
// AGAIN: contract.mlir:[[# @LINE + 5]]:3: error: forward-shim{numerics=two-pass-int8}: the module's activations were quantized for int8-act (its one_word blocks, the first here); run the pipeline on the IR from before that, or give it numerics=int8-act
// INT8: contract.mlir:[[# @LINE + 4]]:3: error: `fwd.matmul` reading an f32 activation — the int8-act numerics read a block-quantized matmul's and a mixture's activation as one_word blocks (fwd-quantize-activations{numerics=int8-act} places their quantizes)
// TWO: contract.mlir:[[# @LINE + 3]]:3: error: `fwd.matmul` reading an f32 activation — the two-pass-int8 numerics read a block-quantized matmul's and a mixture's activation as two_words blocks (fwd-quantize-activations{numerics=two-pass-int8} places their quantizes)
func.func @f32_reads(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
// DEQ-NOT: error
// DEQ: func.func @f32_reads

// -----

// A one_word argument: legal under int8-act only.
// DEQ: contract.mlir:[[# @LINE + 4]]:3: error: `fwd.matmul` reading a one_word activation — the dequant numerics read every activation as f32
// TWO: contract.mlir:[[# @LINE + 3]]:3: error: `fwd.matmul` reading a one_word activation — the two-pass-int8 numerics read a block-quantized matmul's and a mixture's activation as two_words blocks (this one was quantized for other numerics)
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
func.func @dense_reads(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, f16>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, f16> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
