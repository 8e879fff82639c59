// RUN: kiln opt %s -p 'fuse,plan-memory' | filecheck %s
// exp(x) is used by a whole-tensor sum and by the division after it, so it is stored: the only
// intermediate, at offset 0 of a 32 KiB arena (8192 float32: a row too long
// for a row buffer, see passes/fusion.py). The rest is one fused kernel.

// CHECK-LABEL: func.func @f(%x: tensor<8192xf32>) -> tensor<8192xf32> attributes {arena_bytes = 32768, unplanned_bytes = 32768} {
// CHECK-NEXT:    %0 = kiln.exp %x {arena_offset = 0} : tensor<8192xf32>
// CHECK-NEXT:    %1 = kiln.fused(%in0 = %0) -> tensor<8192xf32> {
// CHECK-NEXT:      kiln.reduce_sum %in0
// CHECK:           kiln.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %1 : tensor<8192xf32>
func.func @f(%x: tensor<8192xf32>) -> tensor<8192xf32> {
  %0 = kiln.exp %x : tensor<8192xf32>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = true} : (tensor<8192xf32>) -> tensor<1xf32>
  %2 = kiln.broadcast_to %1 : (tensor<1xf32>) -> tensor<8192xf32>
  %3 = kiln.div %0, %2 : tensor<8192xf32>
  %4 = kiln.tanh %3 : tensor<8192xf32>
  func.return %4 : tensor<8192xf32>
}
