// RUN: fwdshim-opt --allow-unregistered-dialect %s -p fwd-lower-numba --verify-diagnostics | filecheck %s
// `-t numba` (which plans the IR itself when the pass did not run) says the same, exit status 1:
// RUN: not fwdshim-opt --allow-unregistered-dialect %s -t numba 2>&1 | filecheck %s
// RUN: not fwdshim-opt --allow-unregistered-dialect %s -t 'numba{plan_only=true}' 2>&1 | filecheck %s --check-prefixes=CHECK,NOPLAN

// A stage outside a func.func is an error, never silently left unplanned.
%x = "test.op"() : () -> tensor<4xf32>
%y = fwd.silu %x : tensor<4xf32> -> tensor<4xf32>
// CHECK: outside_func.mlir:8:1: error: `fwd.silu` outside a func.func: the lowering plans the stages of a decode-step function
// NOPLAN-NOT: no launch plan
