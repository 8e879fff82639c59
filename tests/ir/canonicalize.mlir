// RUN: kiln opt %s -p canonicalize | filecheck %s
// x * 1 and (-0.0) + x are x; a transpose of a transpose and a no-op reshape vanish; a reshape of a
// reshape is one reshape; sqrt of a constant is folded (IEEE 754 fixes it bit for bit).

// CHECK-LABEL: func.func @f(%x: tensor<4xf32>, %y: tensor<2x3xf32>)
// CHECK-NEXT:    %0 = kiln.reshape %y : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    %1 = kiln.constant dense<[1.0, 1.4142135, 1.7320508]> : tensor<3xf32>
// CHECK-NEXT:    func.return %x, %y, %0, %1 : tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>
func.func @f(%x: tensor<4xf32>, %y: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>) {
  %0 = kiln.constant dense<1.0> : tensor<f32>
  %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
  %2 = kiln.mul %x, %1 : tensor<4xf32>
  %3 = kiln.constant dense<-0.0> : tensor<f32>
  %4 = kiln.broadcast_to %3 : (tensor<f32>) -> tensor<4xf32>
  %5 = kiln.add %4, %2 : tensor<4xf32>
  %6 = kiln.transpose %y {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %7 = kiln.transpose %6 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %8 = kiln.reshape %y : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %9 = kiln.reshape %8 : (tensor<3x2xf32>) -> tensor<6xf32>
  %10 = kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %11 = kiln.sqrt %10 : tensor<3xf32>
  func.return %5, %7, %9, %11 : tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>
}
