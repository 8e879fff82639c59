// RUN: kiln opt %s -p 'fuse,lower-tensor-to-affine' | filecheck %s
// A fused row reduction is computed in the row loop, ahead of the column loop that reads it: a
// row-wise x - max(x) is one loop nest, the maximum a scalar carried through iter_args.

// CHECK-LABEL: func.func @f(%x: memref<8x5xf32>, %out0: memref<8x5xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %k0.i = 0 to 8 {
// CHECK-NEXT:      [[M:%[0-9]+]] = affine.for %k0.r = 0 to 5 iter_args([[ACC:%acc[0-9]+]] = %{{[0-9]+}}) -> (f32) {
// CHECK-NEXT:        [[V:%[0-9]+]] = affine.load %x[%k0.i, %k0.r] : memref<8x5xf32>
// CHECK-NEXT:        [[N:%[0-9]+]] = arith.maximumf [[ACC]], [[V]] : f32
// CHECK-NEXT:        affine.yield [[N]] : f32
// CHECK:           affine.for %k0.j = 0 to 5 {
// CHECK-NEXT:        [[X:%[0-9]+]] = affine.load %x[%k0.i, %k0.j] : memref<8x5xf32>
// CHECK-NEXT:        [[D:%[0-9]+]] = arith.subf [[X]], [[M]] : f32
// CHECK-NEXT:        affine.store [[D]], %out0[%k0.i, %k0.j] : memref<8x5xf32>
// CHECK-NOT:     affine.for
// CHECK:         func.return
func.func @f(%x: tensor<8x5xf32>) -> tensor<8x5xf32> {
  %0 = kiln.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<8x5xf32>) -> tensor<8x1xf32>
  %1 = kiln.broadcast_to %0 : (tensor<8x1xf32>) -> tensor<8x5xf32>
  %2 = kiln.sub %x, %1 : tensor<8x5xf32>
  func.return %2 : tensor<8x5xf32>
}
