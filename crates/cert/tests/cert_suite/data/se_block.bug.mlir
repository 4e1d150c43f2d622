module @jit_bwd attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<4x1x3x3xf32>, %arg2: tensor<4x2xf32>, %arg3: tensor<2x4xf32>, %arg4: tensor<2x4x5x5xf32>) -> (tensor<2x4x5x5xf32> {jax.result_info = "result[0]"}, tensor<4x1x3x3xf32> {jax.result_info = "result[1]"}, tensor<4x2xf32> {jax.result_info = "result[2]"}, tensor<2x4xf32> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 4 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x5x5xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %1:3 = call @clip(%0, %cst, %cst_0) : (tensor<2x4x5x5xf32>, tensor<f32>, tensor<f32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>)
    %2:3 = call @silu(%1#0) : (tensor<2x4x5x5xf32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>)
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%2#0 init: %cst_1) applies stablehlo.add across dimensions = [2, 3] : (tensor<2x4x5x5xf32>, tensor<f32>) -> tensor<2x4xf32>
    %cst_2 = stablehlo.constant dense<2.500000e+01> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %5 = stablehlo.divide %3, %4 : tensor<2x4xf32>
    %6 = stablehlo.dot_general %5, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    %7 = call @relu(%6) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %9 = stablehlo.compare GT, %6, %8, FLOAT : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xi1>
    %10 = stablehlo.dot_general %7, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %11 = stablehlo.negate %10 : tensor<2x4xf32>
    %12 = stablehlo.exponential %11 : tensor<2x4xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %14 = stablehlo.add %13, %12 : tensor<2x4xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %16 = stablehlo.divide %15, %14 : tensor<2x4xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %18 = stablehlo.add %17, %16 : tensor<2x4xf32>
    %19 = stablehlo.multiply %16, %18 : tensor<2x4xf32>
    %20 = stablehlo.broadcast_in_dim %16, dims = [0, 1] : (tensor<2x4xf32>) -> tensor<2x4x1x1xf32>
    %21 = stablehlo.multiply %2#0, %arg4 : tensor<2x4x5x5xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %22 = stablehlo.reduce(%21 init: %cst_7) applies stablehlo.add across dimensions = [2, 3] : (tensor<2x4x5x5xf32>, tensor<f32>) -> tensor<2x4xf32>
    %23 = stablehlo.reshape %22 : (tensor<2x4xf32>) -> tensor<2x4x1x1xf32>
    %24 = stablehlo.broadcast_in_dim %20, dims = [0, 1, 2, 3] : (tensor<2x4x1x1xf32>) -> tensor<2x4x5x5xf32>
    %25 = stablehlo.multiply %arg4, %24 : tensor<2x4x5x5xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %26 = stablehlo.reduce(%23 init: %cst_8) applies stablehlo.add across dimensions = [2, 3] : (tensor<2x4x1x1xf32>, tensor<f32>) -> tensor<2x4xf32>
    %27 = stablehlo.multiply %26, %19 : tensor<2x4xf32>
    %28 = stablehlo.dot_general %27, %7, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
    %29 = stablehlo.transpose %28, dims = [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
    %30 = stablehlo.dot_general %27, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %32 = stablehlo.select %9, %30, %31 : tensor<2x2xi1>, tensor<2x2xf32>
    %33 = stablehlo.dot_general %32, %5, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %34 = stablehlo.transpose %33, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %35 = stablehlo.dot_general %32, %arg2, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<4x2xf32>) -> tensor<2x4xf32>
    %cst_10 = stablehlo.constant dense<2.500000e+01> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %37 = stablehlo.divide %35, %36 : tensor<2x4xf32>
    %38 = stablehlo.broadcast_in_dim %37, dims = [0, 1] : (tensor<2x4xf32>) -> tensor<2x4x5x5xf32>
    %39 = stablehlo.add %25, %38 : tensor<2x4x5x5xf32>
    %40 = call @silu_0(%2#1, %2#2, %1#0, %39) : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
    %41 = call @clip_1(%1#1, %1#2, %40) : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
    %42 = stablehlo.convolution(%arg0, %41) dim_numbers = [f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 4 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<4x1x3x3xf32>
    %43 = stablehlo.reshape %arg1 : (tensor<4x1x3x3xf32>) -> tensor<4x1x1x3x3xf32>
    %44 = stablehlo.transpose %43, dims = [1, 0, 2, 3, 4] : (tensor<4x1x1x3x3xf32>) -> tensor<1x4x1x3x3xf32>
    %45 = stablehlo.reshape %44 : (tensor<1x4x1x3x3xf32>) -> tensor<1x4x3x3xf32>
    %46 = stablehlo.reverse %45, dims = [2, 3] : tensor<1x4x3x3xf32>
    %47 = stablehlo.convolution(%41, %46) dim_numbers = [b, f, 0, 1]x[i, o, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 4 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x4x5x5xf32>, tensor<1x4x3x3xf32>) -> tensor<2x4x5x5xf32>
    return %47, %42, %34, %29 : tensor<2x4x5x5xf32>, tensor<4x1x3x3xf32>, tensor<4x2xf32>, tensor<2x4xf32>
  }
  func.func private @clip(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<2x4x5x5xf32>
    %3 = stablehlo.compare EQ, %arg0, %2, FLOAT : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xi1>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %6 = stablehlo.select %3, %4, %5 : tensor<2x4x5x5xi1>, tensor<2x4x5x5xf32>
    %7 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %8 = stablehlo.compare EQ, %7, %2, FLOAT : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xi1>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %11 = stablehlo.select %8, %9, %10 : tensor<2x4x5x5xi1>, tensor<2x4x5x5xf32>
    %12 = stablehlo.divide %6, %11 : tensor<2x4x5x5xf32>
    %13 = stablehlo.convert %arg2 : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %15 = stablehlo.minimum %14, %2 : tensor<2x4x5x5xf32>
    %16 = stablehlo.compare EQ, %2, %15, FLOAT : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xi1>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %19 = stablehlo.select %16, %17, %18 : tensor<2x4x5x5xi1>, tensor<2x4x5x5xf32>
    %20 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %21 = stablehlo.compare EQ, %20, %15, FLOAT : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xi1>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %24 = stablehlo.select %21, %22, %23 : tensor<2x4x5x5xi1>, tensor<2x4x5x5xf32>
    %25 = stablehlo.divide %19, %24 : tensor<2x4x5x5xf32>
    return %15, %12, %25 : tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>
  }
  func.func private @silu(%arg0: tensor<2x4x5x5xf32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<2x4x5x5xf32>
    %1 = stablehlo.exponential %0 : tensor<2x4x5x5xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %3 = stablehlo.add %2, %1 : tensor<2x4x5x5xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %5 = stablehlo.divide %4, %3 : tensor<2x4x5x5xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x4x5x5xf32>
    %7 = stablehlo.subtract %6, %5 : tensor<2x4x5x5xf32>
    %8 = stablehlo.multiply %5, %7 : tensor<2x4x5x5xf32>
    %9 = stablehlo.multiply %arg0, %5 : tensor<2x4x5x5xf32>
    return %9, %8, %5 : tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>
  }
  func.func private @relu(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x2xf32>
    return %1 : tensor<2x2xf32>
  }
  func.func private @silu_0(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<2x4x5x5xf32>, %arg2: tensor<2x4x5x5xf32>, %arg3: tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32> {
    %0 = stablehlo.multiply %arg2, %arg3 : tensor<2x4x5x5xf32>
    %1 = stablehlo.multiply %arg3, %arg1 : tensor<2x4x5x5xf32>
    %2 = stablehlo.multiply %0, %arg0 : tensor<2x4x5x5xf32>
    %3 = stablehlo.add %1, %2 : tensor<2x4x5x5xf32>
    return %3 : tensor<2x4x5x5xf32>
  }
  func.func private @clip_1(%arg0: tensor<2x4x5x5xf32>, %arg1: tensor<2x4x5x5xf32>, %arg2: tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32> {
    %0 = stablehlo.multiply %arg2, %arg1 : tensor<2x4x5x5xf32>
    %1 = stablehlo.multiply %0, %arg0 : tensor<2x4x5x5xf32>
    return %1 : tensor<2x4x5x5xf32>
  }
}
