// Each fwd.fused lowers to one generated kernel that loads each external input once and stores each
// result once; intermediates stay in registers (`t<j>`), rounding spelled out (fadd_rn, fmul_rn, ...).
// Under programmatic dependent launch (`FWDSHIM_PDL`, default `ahead`) a kernel first waits for the
// launches before it, then lets the next one be scheduled.
// RUN: env FWDSHIM_PDL=ahead fwdshim-opt %s --split-input-file -p 'forward-shim{numerics=dequant}' -t numba | filecheck %s

// A chain carrying its sum on: the sum %s is read outside, so it is a second result.
func.func @chain(%a: tensor<96xf32>, %b: tensor<96xf32>, %c: tensor<96xf32>) -> (tensor<96xf32>, tensor<96xf32>) {
  %t = fwd.elementwise mul %a, %b : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  %s = fwd.elementwise add %c, %t : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  %y = fwd.silu %s : tensor<96xf32> -> tensor<96xf32>
  %z = fwd.elementwise div %y, %a : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  func.return %z, %s : tensor<96xf32>, tensor<96xf32>
}

// CHECK:      // launch plan @chain: 1 stages, 1 kernels, 5 buffers
// CHECK:      //   stage 0: fwd.fused elementwise_chains covers [0, 1, 2, 3]
// CHECK-NEXT: //     kernel fused_chain_mul_add_silu_div_96 grid 1 block 256
// CHECK-NEXT: //       reads  %a, %b, %c
// CHECK-NEXT: //       writes %s, %z
// CHECK-NEXT: //       args   (a0=%a, a1=%b, a2=%c, y0=%s, y1=%z)
// CHECK:      # ---- kernel fused_chain_mul_add_silu_div_96: grid (1,) block (256,)
// CHECK:      def fused_k(a0, a1, a2, y0, y1):
// CHECK-NEXT:     pdl_wait()
// CHECK-NEXT:     pdl_launch()
// CHECK-NEXT:     i = cuda.grid(1)
// CHECK-NEXT:     if i < 96:
// CHECK-NEXT:         x0 = a0[i]
// CHECK-NEXT:         x1 = a1[i]
// CHECK-NEXT:         x2 = a2[i]
// CHECK-NEXT:         t0 = fmul_rn(x0, x1)
// CHECK-NEXT:         t1 = fadd_rn(x2, t0)
// CHECK-NEXT:         t2 = fdiv_rn(t1, fadd_rn(float32(1.0), float32(math.exp(-(t1)))))
// CHECK-NEXT:         t3 = fdiv_rn(t2, x0)
// CHECK-NEXT:         y0[i] = t1
// CHECK-NEXT:         y1[i] = t3
// CHECK-NOT:  [i]

// -----

// A region with a join and forks: one kernel; %g feeds two parts but is loaded from nowhere (a
// register), %u is both read inside and a result.
func.func @region(%a: tensor<80xf32>, %b: tensor<80xf32>, %c: tensor<80xf32>, %d: tensor<80xf32>) -> (tensor<80xf32>, tensor<80xf32>) {
  %g = fwd.elementwise add %a, %b : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %u = fwd.elementwise mul %c, %d : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %sg = fwd.silu %g : tensor<80xf32> -> tensor<80xf32>
  %y = fwd.elementwise mul %sg, %u : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %m = fwd.elementwise max %y, %g : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  func.return %m, %u : tensor<80xf32>, tensor<80xf32>
}

// CHECK:      //   stage 0: fwd.fused elementwise_regions covers [0, 1, 2, 3, 4]
// CHECK-NEXT: //     kernel fused_region_add_mul_silu_mul_max_80 grid 1 block 256
// CHECK:      def fused_k(a0, a1, a2, a3, y0, y1):
// CHECK-NEXT:     pdl_wait()
// CHECK-NEXT:     pdl_launch()
// CHECK-NEXT:     i = cuda.grid(1)
// CHECK-NEXT:     if i < 80:
// CHECK-NEXT:         x0 = a0[i]
// CHECK-NEXT:         x1 = a1[i]
// CHECK-NEXT:         x2 = a2[i]
// CHECK-NEXT:         x3 = a3[i]
// CHECK-NEXT:         t0 = fadd_rn(x0, x1)
// CHECK-NEXT:         t1 = fmul_rn(x2, x3)
// CHECK-NEXT:         t2 = fdiv_rn(t0, fadd_rn(float32(1.0), float32(math.exp(-(t0)))))
// CHECK-NEXT:         t3 = fmul_rn(t2, t1)
// CHECK-NEXT:         t4 = max(t3, t0)
// CHECK-NEXT:         y0[i] = t1
// CHECK-NEXT:         y1[i] = t4
// CHECK-NOT:  [i]

// -----

// add_norm writing the sum on: one RMS norm row kernel with a residual, a weight and the sum.
func.func @add_norm(%x: tensor<576xf32>, %o: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %nw = fwd.weight "blk.0.ffn_norm.weight" : tensor<576xf32>
  %s = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %n, %nw : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %s, %h : tensor<576xf32>, tensor<576xf32>
}

// CHECK:      //   stage 0: fwd.fused add_norm covers [0, 1, 2]
// CHECK-NEXT: //     kernel rms_norm_res_w_sum_1x576_b256 grid 1 block 256
// CHECK-NEXT: //       reads  %x, %o, %nw
// CHECK-NEXT: //       writes %h, %s
// CHECK-NEXT: //       args   (x=%x, residual=%o, weight=%nw, y=%h, sum=%s)
// The row's 3 values a thread (576 at 256 threads, the last pass partial) are loaded before their first
// use and held in registers for the second pass.
// CHECK:      def rms_norm_k(x, residual, weight, y, sum):
// CHECK:          x0 = x[o + tid]
// CHECK-NEXT:     r0 = residual[o + tid]
// CHECK-NEXT:     w0 = weight[tid]
// CHECK:          x2 = x[o + tid + 512] if tid + 512 < 576 else float32(0.0)
// CHECK:          h0 = fadd_rn(x0, r0)
// CHECK:          sum[o + tid] = h0
// CHECK-NEXT:     ss = fadd_rn(ss, fmul_rn(h0, h0))
// CHECK:          y[o + tid] = fmul_rn(fdiv_rn(h0, r), w0)
// CHECK-NOT:      x[o
