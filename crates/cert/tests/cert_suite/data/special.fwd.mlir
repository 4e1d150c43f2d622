module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.atan2 %arg1, %arg0 : tensor<2x3xf32>
    %1 = stablehlo.multiply %arg0, %arg0 : tensor<2x3xf32>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %3 = stablehlo.add %1, %2 : tensor<2x3xf32>
    %4 = chlo.lgamma %3 : tensor<2x3xf32> -> tensor<2x3xf32>
    %5 = stablehlo.multiply %0, %4 : tensor<2x3xf32>
    %6 = chlo.cosh %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %cst_0 = stablehlo.constant dense<2.500000e-01> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %8 = stablehlo.add %6, %7 : tensor<2x3xf32>
    %9 = chlo.digamma %8 : tensor<2x3xf32> -> tensor<2x3xf32>
    %10 = stablehlo.add %5, %9 : tensor<2x3xf32>
    %11 = chlo.asinh %arg1 : tensor<2x3xf32> -> tensor<2x3xf32>
    %cst_1 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %13 = stablehlo.multiply %12, %arg1 : tensor<2x3xf32>
    %14 = chlo.sinh %13 : tensor<2x3xf32> -> tensor<2x3xf32>
    %15 = stablehlo.multiply %11, %14 : tensor<2x3xf32>
    %16 = stablehlo.add %10, %15 : tensor<2x3xf32>
    return %16 : tensor<2x3xf32>
  }
}
