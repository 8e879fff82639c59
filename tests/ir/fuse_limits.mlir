// RUN: kiln opt %s -p fuse | filecheck %s
// RUN: kiln opt %s -p 'fuse{max-places=1}' | filecheck %s --check-prefix ONE
// x * x is read at (i, j) and, through the transpose, at (j, i): two places. Fused, it is
// computed in both; with max-places=1 a value computed in more than one place stays a kernel
// of its own.

// CHECK-LABEL: func.func @f(
// CHECK-NEXT:    %0 = kiln.fused(%in0 = %x) -> tensor<4x4xf32> {
// CHECK-NEXT:      %1 = kiln.mul %in0, %in0 : tensor<4x4xf32>
// CHECK-NEXT:      %2 = kiln.transpose %1
// CHECK-NEXT:      %3 = kiln.add %1, %2 : tensor<4x4xf32>

// ONE-LABEL: func.func @f(
// ONE-NOT:     kiln.fused
// ONE:         %0 = kiln.mul %x, %x : tensor<4x4xf32>
// ONE-NEXT:    %1 = kiln.transpose %0
// ONE-NEXT:    %2 = kiln.add %0, %1 : tensor<4x4xf32>
// ONE-NEXT:    func.return %2
func.func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = kiln.mul %x, %x : tensor<4x4xf32>
  %1 = kiln.transpose %0 {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = kiln.add %0, %1 : tensor<4x4xf32>
  func.return %2 : tensor<4x4xf32>
}
