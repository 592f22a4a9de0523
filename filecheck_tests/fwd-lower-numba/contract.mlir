// A block-quantized matmul (or a mixture) reading its activation in another format than the module's
// contract says (`fwd.numerics`, written by fwd-legalize; `activation()`: f32 under dequant, one_word
// under int8-act, two_words under two-pass-int8) is legal, as the seed answers, but the lowering refuses
// to plan it: a located error naming the matmul and the pass that places the quantizes. A plan never
// runs numerics other than its contract.
// RUN: not fwdshim-opt %s --split-input-file -p 'fwd-legalize{numerics=int8-act},fwd-lower-numba' 2>&1 | filecheck %s --check-prefix=INT8
// RUN: not fwdshim-opt %s --split-input-file -p 'fwd-legalize{numerics=two-pass-int8},fwd-lower-numba' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: not fwdshim-opt %s --split-input-file -p 'fwd-legalize,fwd-lower-numba' 2>&1 | filecheck %s --check-prefix=DEQ
// With the quantizes placed, the same matmul plans: no error.
// RUN: fwdshim-opt %s --split-input-file -p 'forward-shim{numerics=int8-act},fwd-lower-numba' 2>&1 | filecheck %s --check-prefix=PLACED

// INT8: contract.mlir:[[# @LINE + 6]]:3: error: `fwd.matmul` reading an f32 activation — the int8-act numerics read a block-quantized matmul's and a mixture's activation as one_word blocks (fwd-quantize-activations{numerics=int8-act} places their quantizes)
// TWO: contract.mlir:[[# @LINE + 5]]:3: error: `fwd.matmul` reading an f32 activation — the two-pass-int8 numerics read a block-quantized matmul's and a mixture's activation as two_words blocks (fwd-quantize-activations{numerics=two-pass-int8} places their quantizes)
// PLACED-NOT: error
// PLACED: fwd.plan
func.func @f32_reads(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}

// -----

// DEQ: contract.mlir:[[# @LINE + 4]]:3: error: `fwd.matmul` reading a one_word activation — the dequant numerics read every activation as f32 (fwd-quantize-activations{numerics=int8-act} makes one_word blocks: run the pipeline on the IR from before it)
// TWO: contract.mlir:[[# @LINE + 3]]:3: error: `fwd.matmul` reading a one_word activation — the two-pass-int8 numerics read a block-quantized matmul's and a mixture's activation as two_words blocks (this one was quantized for other numerics: run fwd-quantize-activations{numerics=two-pass-int8} on the IR from before that)
func.func @one_word_reads(%q: !fwd.qact<64, one_word>) -> tensor<32xf32> {
  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>
  %y = fwd.matmul %q, %w : !fwd.qact<64, one_word>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
