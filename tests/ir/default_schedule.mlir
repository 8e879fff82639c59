// RUN: kiln opt %s -p 'lower-tensor-to-affine,default-schedule' | filecheck %s
// RUN: kiln opt %s -p 'lower-tensor-to-affine,default-schedule{vector-bits=512 threads=false}' | filecheck %s --check-prefix AVX512
// The schedule a function compiled without tuning gets, with no schedule given: the column loop
// vectorized (8 float32 lanes of 256 bits; 16 of 512), the row loop run in parallel when a thread
// pool exists (a million elements are enough work to wake it; 2**18 operations,
// passes/default_schedule.py), not without one.

// CHECK-LABEL: func.func @f(
// CHECK-NEXT:    affine.parallel (%k0.i) = (0) to (1024) {
// CHECK-NEXT:      affine.for %k0.j = 0 to 128 {
// CHECK-NEXT:        affine.vector_load %x[%k0.i, %k0.j * 8] : memref<1024x1024xf32>, vector<8xf32>
// CHECK-NEXT:        arith.negf {{.*}} : vector<8xf32>

// AVX512-LABEL: func.func @f(
// AVX512-NEXT:    affine.for %k0.i = 0 to 1024 {
// AVX512-NEXT:      affine.for %k0.j = 0 to 64 {
// AVX512-NEXT:        affine.vector_load %x[%k0.i, %k0.j * 16] : memref<1024x1024xf32>, vector<16xf32>
// AVX512-NOT:     affine.parallel
func.func @f(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = kiln.neg %x : tensor<1024x1024xf32>
  func.return %0 : tensor<1024x1024xf32>
}

// RUN: kiln opt %s -p 'lower-tensor-to-affine,default-schedule' | filecheck %s --check-prefix SMALL
// 256 x 256 is 2**13 vector iterations of three operations: a few microseconds, less than
// waking the thread pool costs, so it stays on the calling thread.
// SMALL-LABEL: func.func @small(
// SMALL-NEXT:    affine.for %k0.i = 0 to 256 {
// SMALL-NOT:     affine.parallel
func.func @small(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %0 = kiln.neg %x : tensor<256x256xf32>
  func.return %0 : tensor<256x256xf32>
}
