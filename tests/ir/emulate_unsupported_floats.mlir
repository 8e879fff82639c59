// RUN: kiln opt %s -p emulate-unsupported-floats | filecheck %s
// Every op that computes in f16 computes in f32 between conversions, and rounds its own
// result back to f16, as numpy's float16 loops do; a select only moves f16 and keeps it.

// CHECK-LABEL: func.func @f(%x: tensor<4xf16>, %y: tensor<4xf16>, %c: tensor<4xi1>) -> (tensor<f16>, tensor<4xf16>) {
// CHECK-NEXT:    %0 = kiln.convert %x : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = kiln.convert %y : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT:    %2 = kiln.add %0, %1 : tensor<4xf32>
// CHECK-NEXT:    %3 = kiln.convert %2 : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NEXT:    %4 = kiln.convert %3 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT:    %5 = kiln.reduce_sum %4 {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT:    %6 = kiln.convert %5 : (tensor<f32>) -> tensor<f16>
// CHECK-NEXT:    %7 = kiln.select %c, %3, %x : (tensor<4xi1>, tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NEXT:    func.return %6, %7 : tensor<f16>, tensor<4xf16>
// CHECK-NEXT:  }
func.func @f(%x: tensor<4xf16>, %y: tensor<4xf16>, %c: tensor<4xi1>) -> (tensor<f16>, tensor<4xf16>) {
  %0 = kiln.add %x, %y : tensor<4xf16>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<4xf16>) -> tensor<f16>
  %2 = kiln.select %c, %0, %x : (tensor<4xi1>, tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  func.return %1, %2 : tensor<f16>, tensor<4xf16>
}
