// RUN: kiln opt %s -p fuse | filecheck %s
// RUN: kiln opt %s -p 'fuse{row-buffer-bytes=400}' | filecheck %s
// RUN: kiln opt %s -p 'fuse{row-buffer-bytes=399}' | filecheck %s --check-prefix SMALL
// A row softmax: exp is needed by the row sum and by the division, so it joins marked
// row_buffer, computed once per row into a buffer of one row (100 float32, 400 bytes). A
// row-buffer-bytes limit below the row keeps exp a kernel of its own, stored whole.

// CHECK-LABEL: func.func @f(
// CHECK-NEXT:    %0 = kiln.fused(%in0 = %x) -> tensor<4x100xf32> {
// CHECK-NEXT:      %1 = kiln.exp %in0 {row_buffer = 1} : tensor<4x100xf32>
// CHECK-NEXT:      %2 = kiln.reduce_sum %1

// SMALL-LABEL: func.func @f(
// SMALL-NEXT:    %0 = kiln.exp %x : tensor<4x100xf32>
// SMALL-NEXT:    %1 = kiln.fused(%in0 = %0) -> tensor<4x100xf32> {
// SMALL-NEXT:      %2 = kiln.reduce_sum %in0
// SMALL-NOT:     row_buffer
func.func @f(%x: tensor<4x100xf32>) -> tensor<4x100xf32> {
  %0 = kiln.exp %x : tensor<4x100xf32>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x100xf32>) -> tensor<4x1xf32>
  %2 = kiln.broadcast_to %1 : (tensor<4x1xf32>) -> tensor<4x100xf32>
  %3 = kiln.div %0, %2 : tensor<4x100xf32>
  func.return %3 : tensor<4x100xf32>
}
