// RUN: kiln opt %s -p 'default-schedule{threads=false}' | filecheck %s
// RUN: kiln opt %s -p 'default-schedule{vector-bits=128 threads=false}' | filecheck %s --check-prefix SSE
// A schedule-stage pass on loop-level IR read from text: 20 columns are two vectors of 8 and a
// scalar remainder loop of 4; with 128-bit vectors, five vectors of 4 and no remainder.

// CHECK-LABEL: func.func @scale(
// CHECK:         affine.for %k0.j = 0 to 2 {
// CHECK-NEXT:      affine.vector_load %x[%k0.i, %k0.j * 8] : memref<4x20xf32>, vector<8xf32>
// CHECK:         affine.for %k0.j.tail = 0 to 4 {
// CHECK-NEXT:      affine.load %x[%k0.i, %k0.j.tail + 16] : memref<4x20xf32>

// SSE-LABEL: func.func @scale(
// SSE:         affine.for %k0.j = 0 to 5 {
// SSE-NEXT:      affine.vector_load %x[%k0.i, %k0.j * 4] : memref<4x20xf32>, vector<4xf32>
// SSE-NOT:     tail
func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
  affine.for %k0.i = 0 to 4 {
    affine.for %k0.j = 0 to 20 {
      %0 = affine.load %x[%k0.i, %k0.j] : memref<4x20xf32>
      %1 = affine.load %c[] : memref<f32>
      %2 = arith.mulf %0, %1 : f32
      affine.store %2, %out0[%k0.i, %k0.j] : memref<4x20xf32>
    } {kiln.loop = "k0.j"}
  } {kiln.loop = "k0.i"}
  func.return
}
