// RUN: kiln opt %s -p lower-tensor-to-affine | filecheck %s
// RUN: kiln opt %s -p 'lower-tensor-to-affine{grid-sums=true}' | filecheck %s --check-prefix GRID
// RUN: kiln opt %s -p lower-tensor-to-affine-gpu | filecheck %s --check-prefix GRID
// A whole-tensor float sum becomes a summation tree on the CPU (blocks of 128 added in levels
// of at most 8); with grid-sums, the CUDA targets' lowering, it stays one loop that the GPU
// spreads over its grid.

// CHECK-LABEL: func.func @f(%x: memref<4096xf32>, %out0: memref<f32>)
// CHECK:         affine.for %k0.r.b = 0 to 8
// CHECK:           affine.for %k0.r.b1 = 0 to 4
// CHECK:             affine.for %k0.r = 0 to 128
// CHECK-NEXT:          affine.load %x[%k0.r.b * 512 + %k0.r.b1 * 128 + %k0.r]

// GRID-LABEL: func.func @f(%x: memref<4096xf32>, %out0: memref<f32>)
// GRID-NEXT:    %0 = arith.constant 0.0 : f32
// GRID-NEXT:    %1 = affine.for %k0.r = 0 to 4096 iter_args(%acc0 = %0) -> (f32) {
// GRID-NEXT:      %2 = affine.load %x[%k0.r] : memref<4096xf32>
// GRID-NEXT:      %3 = arith.addf %acc0, %2 : f32
// GRID-NEXT:      affine.yield %3 : f32
// GRID-NEXT:    } {kiln.loop = "k0.r"}
// GRID-NEXT:    affine.store %1, %out0[] : memref<f32>
func.func @f(%x: tensor<4096xf32>) -> tensor<f32> {
  %0 = kiln.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4096xf32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}
