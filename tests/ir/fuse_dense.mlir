// RUN: kiln opt %s -p fuse | filecheck %s
// A dense layer is one kernel: the matmul, its bias and its activation in one kiln.fused group.

// CHECK-LABEL: func.func @dense(
// CHECK-NEXT:    %0 = kiln.fused(%in0 = %x, %in1 = %w, %in2 = %b) -> tensor<8x3xf32> {
// CHECK-NEXT:      %1 = kiln.matmul %in0, %in1 : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT:      %2 = kiln.broadcast_to %in2 : (tensor<3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT:      %3 = kiln.add %1, %2 : tensor<8x3xf32>
// CHECK-NEXT:      %4 = kiln.tanh %3 : tensor<8x3xf32>
// CHECK-NEXT:      kiln.yield %4 : tensor<8x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %0 : tensor<8x3xf32>
func.func @dense(%x: tensor<8x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<8x3xf32> {
  %0 = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %1 = kiln.broadcast_to %b : (tensor<3xf32>) -> tensor<8x3xf32>
  %2 = kiln.add %0, %1 : tensor<8x3xf32>
  %3 = kiln.tanh %2 : tensor<8x3xf32>
  func.return %3 : tensor<8x3xf32>
}
