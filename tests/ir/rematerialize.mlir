// RUN: kiln opt %s -p rematerialize | filecheck %s
// tanh(x) is read again 7 ops later: it is recomputed right before that use, and the first copy
// serves only the early use.

// CHECK-LABEL: func.func @f(
// CHECK:         %0 = kiln.tanh %x : tensor<8xf32>
// CHECK-NEXT:    %1 = kiln.reshape %0
// CHECK:         %6 = kiln.reshape %5
// CHECK-NEXT:    %7 = kiln.tanh %x : tensor<8xf32>
// CHECK-NEXT:    %8 = kiln.mul %6, %7 : tensor<8xf32>
func.func @f(%x: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<8xf32> {
  %0 = kiln.tanh %x : tensor<8xf32>
  %1 = kiln.reshape %0 : (tensor<8xf32>) -> tensor<1x8xf32>
  %2 = kiln.matmul %1, %w : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
  %3 = kiln.exp %2 : tensor<1x8xf32>
  %4 = kiln.matmul %3, %w : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
  %5 = kiln.sin %4 : tensor<1x8xf32>
  %6 = kiln.reshape %5 : (tensor<1x8xf32>) -> tensor<8xf32>
  %7 = kiln.mul %6, %0 : tensor<8xf32>
  func.return %7 : tensor<8xf32>
}
