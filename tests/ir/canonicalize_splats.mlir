// RUN: kiln opt %s -p canonicalize | filecheck %s
// Elementwise ops of broadcast scalars fold to a broadcast scalar, not to a 1000-element constant:
// 2 - 1 is 1, x ** 1 is x, and x ** 2 is x * x.

// CHECK-LABEL: func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
// CHECK-NEXT:    %0 = kiln.mul %x, %x : tensor<1000xf32>
// CHECK-NEXT:    func.return %0 : tensor<1000xf32>
func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = kiln.constant dense<2.0> : tensor<f32>
  %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<1000xf32>
  %2 = kiln.constant dense<1.0> : tensor<f32>
  %3 = kiln.broadcast_to %2 : (tensor<f32>) -> tensor<1000xf32>
  %4 = kiln.sub %1, %3 : tensor<1000xf32>
  %5 = kiln.pow %x, %4 : tensor<1000xf32>
  %6 = kiln.pow %5, %1 : tensor<1000xf32>
  func.return %6 : tensor<1000xf32>
}
