// String literals that do not end or hold an escape that is not one, in every place a string is
// lexed: each is an error at the opening quote (or the backslash), at once (xDSL's lexer regex took
// time doubling per character on an unterminated string: these lines would never finish).
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --allow-unregistered-dialect | filecheck %s

%w = fwd.weight "blk.0.attn_norm.weight : tensor<64xf32>
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:17
// CHECK: string literal not terminated: no closing `"` before the end of the line

// -----

%s = fwd.silu %x into "a_buffer_name_that_goes_on_and_on_without_an_end : tensor<64xf32>
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:23
// CHECK: string literal not terminated: no closing `"` before the end of the line

// -----

func.func @"forward_step_with_a_long_quoted_name(%x: tensor<64xf32>) -> tensor<64xf32> {
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:12
// CHECK: string literal not terminated: no closing `"` before the end of the line
  func.return %x : tensor<64xf32>
}

// -----

%s = "fwd.silu_with_a_generic_name_that_does_not_end_anywhere_at_all(%x) : (tensor<64xf32>) -> tensor<64xf32>
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:6
// CHECK: string literal not terminated: no closing `"` before the end of the line

// -----

"builtin.module"() ({}) {"a_dictionary_key_that_never_ends_before_the_line_does = 1} : () -> ()
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:26
// CHECK: string literal not terminated: no closing `"` before the end of the line

// -----

%w = fwd.weight "w" : tensor<64xf32> loc("a_file_name_that_never_ends_before_the_line_does.mlir:1:2)
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:42
// CHECK: string literal not terminated: no closing `"` before the end of the line

// -----

%w = fwd.weight "blk.0\q.weight" : tensor<64xf32>
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:23
// CHECK: invalid escape `\q` in a string literal (escapes: \n \t \\ \" or two hex digits)

// -----

// The body of an unregistered attribute is scanned raw (xDSL's own scan, linear).
"x.op"() {a = #mine.attr<"a_string_in_an_unregistered_attribute_body_that_never_ends>} : () -> ()
// CHECK: invalid_strings.mlir:[[# @LINE - 1]]:26
// CHECK: Unterminated string literal in dialect symbol body
