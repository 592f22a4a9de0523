// RUN: fwdshim-opt --allow-unregistered-dialect %s -p fwd-lower-numba --verify-diagnostics | filecheck %s

// A stage outside a func.func is an error, never silently left unplanned.
%x = "test.op"() : () -> tensor<4xf32>
%y = fwd.silu %x : tensor<4xf32> -> tensor<4xf32>
// CHECK: outside_func.mlir:5:1: error: `fwd.silu` outside a func.func: the lowering plans the stages of a decode-step function
