module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<i1>, %arg1: tensor<4x3xf32>) -> (tensor<4x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.convert %arg0 : (tensor<i1>) -> tensor<i32>
    %1 = "stablehlo.case"(%0) ({
      %2 = stablehlo.negate %arg1 : tensor<4x3xf32>
      stablehlo.return %2 : tensor<4x3xf32>
    }, {
      stablehlo.return %arg1 : tensor<4x3xf32>
    }) : (tensor<i32>) -> tensor<4x3xf32>
    return %1 : tensor<4x3xf32>
  }
}
