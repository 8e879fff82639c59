// RUN: kiln opt %s -p dce | filecheck %s
// An op nobody uses goes, and so does what only it used.

// CHECK-LABEL: func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %0 = kiln.neg %x : tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
// CHECK-NEXT:  }
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.exp %x : tensor<4xf32>
  %1 = kiln.tanh %0 : tensor<4xf32>
  %2 = kiln.neg %x : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
