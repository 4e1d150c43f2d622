module @jit_block attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<4x1x3x3xf32>, %arg2: tensor<4x2xf32>, %arg3: tensor<2x4xf32>) -> (tensor<2x4x5x5xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 4 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x5x5xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %1 = call @clip(%0, %cst, %cst_0) : (tensor<2x4x5x5xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4x5x5xf32>
    %2 = call @silu(%1) : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%2 init: %cst_1) applies stablehlo.add across dimensions = [2, 3] : (tensor<2x4x5x5xf32>, tensor<f32>) -> tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<2.500000e+01> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %5 = stablehlo.divide %3, %4 : tensor<2x4xf32>
    %6 = stablehlo.dot_general %5, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    %7 = call @relu(%6) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %8 = stablehlo.dot_general %7, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %9 = stablehlo.negate %8 : tensor<2x4xf32>
    %10 = stablehlo.exponential %9 : tensor<2x4xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %12 = stablehlo.add %11, %10 : tensor<2x4xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %14 = stablehlo.divide %13, %12 : tensor<2x4xf32>
    %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1] : (tensor<2x4xf32>) -> tensor<2x4x1x1xf32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0, 1, 2, 3] : (tensor<2x4x1x1xf32>) -> tensor<2x4x5x5xf32>
    %17 = stablehlo.multiply %2, %16 : tensor<2x4x5x5xf32>
    return %17 : tensor<2x4x5x5xf32>
  }
  func.func private @clip(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<2x4x5x5xf32> {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<2x4x5x5xf32>
    %3 = stablehlo.convert %arg2 : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %5 = stablehlo.minimum %4, %2 : tensor<2x4x5x5xf32>
    return %5 : tensor<2x4x5x5xf32>
  }
  func.func private @silu(%arg0: tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32> {
    %0 = stablehlo.negate %arg0 : tensor<2x4x5x5xf32>
    %1 = stablehlo.exponential %0 : tensor<2x4x5x5xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %3 = stablehlo.add %2, %1 : tensor<2x4x5x5xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %5 = stablehlo.divide %4, %3 : tensor<2x4x5x5xf32>
    %6 = stablehlo.multiply %arg0, %5 : tensor<2x4x5x5xf32>
    return %6 : tensor<2x4x5x5xf32>
  }
  func.func private @relu(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x2xf32>
    return %1 : tensor<2x2xf32>
  }
}
