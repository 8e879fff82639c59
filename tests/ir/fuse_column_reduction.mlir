// RUN: kiln opt %s -p fuse | filecheck %s
// A column maximum does not join the row loop of what reads it: fused, it would be recomputed
// for every row. It stays a kernel of its own.

// CHECK-LABEL: func.func @f(
// CHECK-NOT:     kiln.fused
// CHECK:         kiln.reduce_max %x
// CHECK-NOT:     kiln.fused
// CHECK:         func.return
func.func @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = kiln.reduce_max %x {axes = array<i64: 0>, keepdims = true} : (tensor<8x4xf32>) -> tensor<1x4xf32>
  %1 = kiln.broadcast_to %0 : (tensor<1x4xf32>) -> tensor<8x4xf32>
  %2 = kiln.sub %x, %1 : tensor<8x4xf32>
  func.return %2 : tensor<8x4xf32>
}
