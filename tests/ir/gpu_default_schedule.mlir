// RUN: kiln opt %s -p 'lower-tensor-to-affine-gpu,gpu-default-schedule' | filecheck %s
// The CUDA targets' schedule stage from IR text: a row sum gets a block per row and the row's
// threads share its sum; an elementwise kernel no recipe claims keeps its loops (a thread per
// element, mapped by the CUDA printer).

// CHECK-LABEL: func.func @f(
// CHECK:         affine.for %k0.i = 0 to 64 {
// CHECK-NEXT:      affine.for %k0.r = 0 to 256
// CHECK:           } {kiln.loop = "k0.r", kiln.bind = "threadIdx.x"}
// CHECK:         } {kiln.loop = "k0.i", kiln.bind = "blockIdx.x"}
// CHECK:         affine.for %k1.i = 0 to 64 {
// CHECK-NOT:     kiln.bind
// CHECK:         func.return
func.func @f(%x: tensor<64x256xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %0 = kiln.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<64x256xf32>) -> tensor<64xf32>
  %1 = kiln.neg %0 : tensor<64xf32>
  func.return %0, %1 : tensor<64xf32>, tensor<64xf32>
}
