// RUN: kiln opt %s -p lower-tensor-to-affine | filecheck %s
// Destination-passing style: the result is an extra memref argument. A broadcast is an index into
// its operand, not a copy; each op not fused with another is a loop nest of its own, kernel k<n>,
// and the intermediate between them is allocated and freed.

// CHECK-LABEL: func.func @add(%a: memref<4xf32>, %b: memref<3x4xf32>, %out0: memref<3x4xf32>)
// CHECK-NEXT:    [[T:%[a-z0-9]+]] = memref.alloc() {alignment = 64 : i64{{.*}}} : memref<3x4xf32>
// CHECK-NEXT:    affine.for %k0.i = 0 to 3 {
// CHECK-NEXT:      affine.for %k0.j = 0 to 4 {
// CHECK-NEXT:        [[A:%[0-9]+]] = affine.load %a[%k0.j] : memref<4xf32>
// CHECK-NEXT:        [[B:%[0-9]+]] = affine.load %b[%k0.i, %k0.j] : memref<3x4xf32>
// CHECK-NEXT:        [[S:%[0-9]+]] = arith.addf [[A]], [[B]] : f32
// CHECK-NEXT:        affine.store [[S]], [[T]][%k0.i, %k0.j] : memref<3x4xf32>
// CHECK:         affine.for %k1.i = 0 to 3 {
// CHECK-NEXT:      affine.for %k1.j = 0 to 4 {
// CHECK-NEXT:        [[L:%[0-9]+]] = affine.load [[T]][%k1.i, %k1.j] : memref<3x4xf32>
// CHECK-NEXT:        [[E:%[0-9]+]] = math.exp [[L]] : f32
// CHECK-NEXT:        affine.store [[E]], %out0[%k1.i, %k1.j] : memref<3x4xf32>
// CHECK:         memref.dealloc [[T]] : memref<3x4xf32>
// CHECK-NEXT:    func.return
func.func @add(%a: tensor<4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = kiln.broadcast_to %a : (tensor<4xf32>) -> tensor<3x4xf32>
  %1 = kiln.add %0, %b : tensor<3x4xf32>
  %2 = kiln.exp %1 : tensor<3x4xf32>
  func.return %2 : tensor<3x4xf32>
}
