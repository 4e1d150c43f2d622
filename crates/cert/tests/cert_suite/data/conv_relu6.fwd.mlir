module @jit_conv_relu6 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x6x6xf32>, %arg1: tensor<4x3x3x3xf32>) -> (tensor<2x4x6x6xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %1 = call @clip(%0, %cst, %cst_0) : (tensor<2x4x6x6xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4x6x6xf32>
    return %1 : tensor<2x4x6x6xf32>
  }
  func.func private @clip(%arg0: tensor<2x4x6x6xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<2x4x6x6xf32> {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<2x4x6x6xf32>
    %3 = stablehlo.convert %arg2 : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<2x4x6x6xf32>
    %5 = stablehlo.minimum %4, %2 : tensor<2x4x6x6xf32>
    return %5 : tensor<2x4x6x6xf32>
  }
}
