// RUN: kiln opt %s -p lower-tensor-to-affine | filecheck %s
// numpy's unsigned integers are ui8 ... ui64 in the tensor IR and signless at the loop
// level, as MLIR's arith takes them: the memrefs hold i8, and the ops say which compute
// unsigned (divui, cmpi ugt, uitofp). x // 0 is 0, as in numpy.

// CHECK-LABEL: func.func @f(%x: memref<4xi8>, %y: memref<4xi8>, %out0: memref<4xi8>, %out1: memref<4xi1>, %out2: memref<4xf32>)
// CHECK:         [[X:%[0-9]+]] = affine.load %x[%k0.i] : memref<4xi8>
// CHECK-NEXT:    [[Y:%[0-9]+]] = affine.load %y[%k0.i] : memref<4xi8>
// CHECK-NEXT:    [[ZERO:%[0-9]+]] = arith.constant 0 : i8
// CHECK-NEXT:    [[BYZERO:%[0-9]+]] = arith.cmpi eq, [[Y]], [[ZERO]] : i8
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1 : i8
// CHECK-NEXT:    [[SAFE:%[0-9]+]] = arith.select [[BYZERO]], [[ONE]], [[Y]] : i8
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0 : i8
// CHECK-NEXT:    [[Q:%[0-9]+]] = arith.divui [[X]], [[SAFE]] : i8
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.select [[BYZERO]], [[Z]], [[Q]] : i8
// CHECK-NEXT:    affine.store [[R]], %out0[%k0.i] : memref<4xi8>
// CHECK:         arith.cmpi ugt, {{.*}} : i8
// CHECK:         arith.uitofp {{.*}} : i8 to f32
func.func @f(%x: tensor<4xui8>, %y: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xi1>, tensor<4xf32>) {
  %0 = kiln.floor_divide %x, %y : tensor<4xui8>
  %1 = kiln.cmp %x, %y {predicate = "gt"} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  %2 = kiln.convert %x : (tensor<4xui8>) -> tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xui8>, tensor<4xi1>, tensor<4xf32>
}
