module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x6x6xf32>, %arg1: tensor<4x3x3x3xf32>, %arg2: tensor<2x4x6x6xf32>) -> (tensor<2x3x6x6xf32> {jax.result_info = "result[0]"}, tensor<4x3x3x3xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %1:2 = call @clip(%0, %cst, %cst_0) : (tensor<2x4x6x6xf32>, tensor<f32>, tensor<f32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>)
    %2 = call @clip_0(%1#0, %1#1, %arg2) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
    %3 = stablehlo.convolution(%arg0, %2) dim_numbers = [f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x3x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<4x3x3x3xf32>
    %4 = stablehlo.reverse %arg1, dims = [2, 3] : tensor<4x3x3x3xf32>
    %5 = stablehlo.convolution(%2, %4) dim_numbers = [b, f, 0, 1]x[i, o, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x6x6xf32>
    return %5, %3 : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>
  }
  func.func private @clip(%arg0: tensor<2x4x6x6xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<2x4x6x6xf32>
    %3 = stablehlo.compare EQ, %arg0, %2, FLOAT : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xi1>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %6 = stablehlo.select %3, %4, %5 : tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>
    %7 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %8 = stablehlo.compare EQ, %7, %2, FLOAT : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xi1>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %11 = stablehlo.select %8, %9, %10 : tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>
    %12 = stablehlo.divide %6, %11 : tensor<2x4x6x6xf32>
    %13 = stablehlo.convert %arg2 : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %15 = stablehlo.minimum %14, %2 : tensor<2x4x6x6xf32>
    %16 = stablehlo.compare EQ, %2, %15, FLOAT : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xi1>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %19 = stablehlo.select %16, %17, %18 : tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>
    %20 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %21 = stablehlo.compare EQ, %20, %15, FLOAT : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xi1>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %24 = stablehlo.select %21, %22, %23 : tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>
    %25 = stablehlo.divide %19, %24 : tensor<2x4x6x6xf32>
    return %12, %25 : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
  }
  func.func private @clip_0(%arg0: tensor<2x4x6x6xf32>, %arg1: tensor<2x4x6x6xf32>, %arg2: tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32> {
    %0 = stablehlo.multiply %arg2, %arg1 : tensor<2x4x6x6xf32>
    %1 = stablehlo.multiply %0, %arg0 : tensor<2x4x6x6xf32>
    return %1 : tensor<2x4x6x6xf32>
  }
}
