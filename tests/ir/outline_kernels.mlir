// RUN: kiln opt %s -p outline-kernels | filecheck %s
// Each kernel's nests move into a private function, called where they were. The arena is
// passed as its base and its view made again inside; the sum's loop, which gives a value,
// stays, and its value is an argument of the kernel that reads it.

// CHECK-LABEL: func.func private @f_k0(%x: memref<8xf32>, %arena: memref<64xi8>) {
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK-NEXT:    %t = memref.view %arena[%c0][] : memref<64xi8> to memref<8xf32>
// CHECK-NEXT:    affine.for %k0.i = 0 to 8 {
// CHECK:         } {kiln.loop = "k0.i"}
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func private @f_k2(%arena: memref<64xi8>, %sum: f32, %out0: memref<8xf32>) {
// CHECK:         arith.divf %{{.*}}, %sum : f32
// CHECK-LABEL: func.func @f(%x: memref<8xf32>, %out0: memref<8xf32>) {
// CHECK:         func.call @f_k0(%x, %arena) {kiln.kernel = "k0"} : (memref<8xf32>, memref<64xi8>) -> ()
// CHECK:         %sum = affine.for %k1.r = 0 to 8
// CHECK:         func.call @f_k2(%arena, %sum, %out0) {kiln.kernel = "k2"} : (memref<64xi8>, f32, memref<8xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %arena : memref<64xi8>
// CHECK-NEXT:    func.return
module {
  func.func @f(%x: memref<8xf32>, %out0: memref<8xf32>) {
    %arena = memref.alloc() {alignment = 64 : i64} : memref<64xi8>
    %c0 = arith.constant 0 : index
    %t = memref.view %arena[%c0][] : memref<64xi8> to memref<8xf32>
    affine.for %k0.i = 0 to 8 {
      %0 = affine.load %x[%k0.i] : memref<8xf32>
      %1 = math.exp %0 : f32
      affine.store %1, %t[%k0.i] : memref<8xf32>
    } {kiln.loop = "k0.i"}
    %zero = arith.constant 0.0 : f32
    %sum = affine.for %k1.r = 0 to 8 iter_args(%acc = %zero) -> (f32) {
      %2 = affine.load %t[%k1.r] : memref<8xf32>
      %3 = arith.addf %acc, %2 : f32
      affine.yield %3 : f32
    } {kiln.loop = "k1.r"}
    affine.for %k2.i = 0 to 8 {
      %4 = affine.load %t[%k2.i] : memref<8xf32>
      %5 = arith.divf %4, %sum : f32
      affine.store %5, %out0[%k2.i] : memref<8xf32>
    } {kiln.loop = "k2.i"}
    memref.dealloc %arena : memref<64xi8>
    func.return
  }
}
