module @jit_leaky_jax attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x5xf32>, %arg1: tensor<3x5xf32>) -> (tensor<3x5xf32> {jax.result_info = "result[0]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xi1>
    %cst_0 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %3 = stablehlo.multiply %2, %arg0 : tensor<3x5xf32>
    %4 = call @_where(%1, %arg0, %3) : (tensor<3x5xi1>, tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %5:2 = call @_where_0(%1, %arg1) : (tensor<3x5xi1>, tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>)
    %cst_1 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %7 = stablehlo.multiply %6, %5#1 : tensor<3x5xf32>
    %8 = stablehlo.add %5#0, %7 : tensor<3x5xf32>
    return %8 : tensor<3x5xf32>
  }
  func.func private @_where(%arg0: tensor<3x5xi1>, %arg1: tensor<3x5xf32>, %arg2: tensor<3x5xf32>) -> tensor<3x5xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<3x5xi1>, tensor<3x5xf32>
    return %0 : tensor<3x5xf32>
  }
  func.func private @_where_0(%arg0: tensor<3x5xi1>, %arg1: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %1 = stablehlo.select %arg0, %0, %arg1 : tensor<3x5xi1>, tensor<3x5xf32>
    %2 = stablehlo.select %arg0, %arg1, %0 : tensor<3x5xi1>, tensor<3x5xf32>
    return %2, %1 : tensor<3x5xf32>, tensor<3x5xf32>
  }
}
