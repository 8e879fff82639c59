// RUN: kiln opt %s -p cse | filecheck %s
// One op per distinct computation: equal constants merge by value, and a location is a note
// that does not make two equal ops different.

// CHECK-LABEL: func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %0 = kiln.constant dense<1.0> : tensor<f32>
// CHECK-NEXT:    %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %2 = kiln.add %x, %1 : tensor<4xf32>
// CHECK-NEXT:    %3 = kiln.mul %2, %2 : tensor<4xf32>
// CHECK-NEXT:    func.return %3 : tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.constant dense<1.0> : tensor<f32>
  %1 = kiln.constant dense<1.0> : tensor<f32>
  %2 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
  %3 = kiln.broadcast_to %1 : (tensor<f32>) -> tensor<4xf32>
  %4 = kiln.add %x, %2 : tensor<4xf32>
  %5 = kiln.add %x, %3 : tensor<4xf32> loc("elsewhere.py":9:1)
  %6 = kiln.mul %4, %5 : tensor<4xf32>
  func.return %6 : tensor<4xf32>
}
