// RUN: kiln opt %s -p plan-memory | filecheck %s
// RUN: kiln opt %s -p 'plan-memory{alignment=16}' | filecheck %s --check-prefix A16
// Every buffer's size and offset is a multiple of the alignment: 64 bytes by default, so the
// 12- and 20-byte exps and the 4-byte sums take 64 bytes each; at 16 bytes the arena is a
// third as large (the 12 bytes of exp(x) round to 16, exp(y)'s 20 to 32).

// CHECK-LABEL: func.func @f({{.*}} attributes {arena_bytes = 192, unplanned_bytes = 256} {
// CHECK-NEXT:    kiln.exp %x {arena_offset = 0}
// CHECK-NEXT:    kiln.reduce_sum {{.*}}arena_offset = 64}
// CHECK-NEXT:    kiln.exp %y {arena_offset = 0}
// CHECK-NEXT:    kiln.reduce_sum {{.*}}arena_offset = 128}

// A16-LABEL: func.func @f({{.*}} attributes {arena_bytes = 64, unplanned_bytes = 80} {
// A16-NEXT:    kiln.exp %x {arena_offset = 0}
// A16-NEXT:    kiln.reduce_sum {{.*}}arena_offset = 16}
// A16-NEXT:    kiln.exp %y {arena_offset = 32}
// A16-NEXT:    kiln.reduce_sum {{.*}}arena_offset = 0}
func.func @f(%x: tensor<3xf32>, %y: tensor<5xf32>) -> tensor<f32> {
  %0 = kiln.exp %x : tensor<3xf32>
  %1 = kiln.exp %y : tensor<5xf32>
  %2 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %3 = kiln.reduce_sum %1 {axes = array<i64: 0>, keepdims = false} : (tensor<5xf32>) -> tensor<f32>
  %4 = kiln.add %2, %3 : tensor<f32>
  func.return %4 : tensor<f32>
}
