// RUN: kiln opt %s -p lower-tensor-to-affine | filecheck %s
// Views move no data: a transpose swaps the indices of the load, a reversed slice of a reshape reads
// through a negative coefficient and floordiv/mod.

// CHECK-LABEL: func.func @transpose(
// CHECK:         affine.load %x[%k0.j, %k0.i] : memref<3x4xf32>
// CHECK-NOT:     memref.alloc
// CHECK-LABEL: func.func @reversed_rows(
// CHECK:         affine.load %x[(%k0.i * -2 + %k0.j + 10) floordiv 4, (%k0.i * -2 + %k0.j + 10) mod 4] : memref<3x4xf32>
func.func @transpose(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %1 = kiln.neg %0 : tensor<4x3xf32>
  func.return %1 : tensor<4x3xf32>
}

func.func @reversed_rows(%x: tensor<3x4xf32>) -> tensor<6x2xf32> {
  %0 = kiln.reshape %x : (tensor<3x4xf32>) -> tensor<6x2xf32>
  %1 = kiln.slice %0 {start = array<i64: 5, 0>, stop = array<i64: -1, 2>, step = array<i64: -1, 1>} : (tensor<6x2xf32>) -> tensor<6x2xf32>
  %2 = kiln.neg %1 : tensor<6x2xf32>
  func.return %2 : tensor<6x2xf32>
}
