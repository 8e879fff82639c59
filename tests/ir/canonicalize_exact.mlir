// RUN: kiln opt %s -p canonicalize | filecheck %s
// Rewrites are exact or not done. x + 0.0 stays (at x = -0.0 it is +0.0) and so does x * 0.0
// (-x, NaN and infinities); exp and float sums are each target's own, so they are computed at run
// time; an integer sum wraps around exactly, so it is folded.

// CHECK-LABEL: func.func @f(%x: tensor<4xf32>)
// CHECK:         kiln.add %x, %{{[0-9]+}} : tensor<4xf32>
// CHECK:         kiln.mul %x, %{{[0-9]+}} : tensor<4xf32>
// CHECK:         [[C:%[0-9]+]] = kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
// CHECK-NEXT:    kiln.exp [[C]] : tensor<3xf32>
// CHECK-NEXT:    kiln.reduce_sum [[C]]
// CHECK-NEXT:    kiln.constant dense<-2147483643> : tensor<i32>
// CHECK-NOT:     kiln.reduce_sum
// CHECK:         func.return
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) {
  %0 = kiln.constant dense<0.0> : tensor<f32>
  %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
  %2 = kiln.add %x, %1 : tensor<4xf32>
  %3 = kiln.mul %x, %1 : tensor<4xf32>
  %4 = kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %5 = kiln.exp %4 : tensor<3xf32>
  %6 = kiln.reduce_sum %4 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %7 = kiln.constant dense<[2147483647, 1, 5]> : tensor<3xi32>
  %8 = kiln.reduce_sum %7 {axes = array<i64: 0>, keepdims = false} : (tensor<3xi32>) -> tensor<i32>
  func.return %2, %3, %5, %6, %8 : tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>
}
