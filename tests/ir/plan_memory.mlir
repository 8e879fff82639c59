// PASSES: fuse plan-memory
// exp(x) is used by a whole-tensor sum and by the division after it, so it is stored: the only
// intermediate, at offset 0 of a 256-byte arena (64 float32). The rest is one fused kernel.

// CHECK-LABEL: func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> attributes {arena_bytes = 256, unplanned_bytes = 256} {
// CHECK-NEXT:    %0 = kiln.exp %x {arena_offset = 0} : tensor<64xf32>
// CHECK-NEXT:    %1 = kiln.fused(%in0 = %0) -> tensor<64xf32> {
// CHECK-NEXT:      kiln.reduce_sum %in0
// CHECK:           kiln.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %1 : tensor<64xf32>
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %0 = kiln.exp %x : tensor<64xf32>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = true} : (tensor<64xf32>) -> tensor<1xf32>
  %2 = kiln.broadcast_to %1 : (tensor<1xf32>) -> tensor<64xf32>
  %3 = kiln.div %0, %2 : tensor<64xf32>
  %4 = kiln.tanh %3 : tensor<64xf32>
  func.return %4 : tensor<64xf32>
}
