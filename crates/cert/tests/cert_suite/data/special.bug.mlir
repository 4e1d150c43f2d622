module @jit_b attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<2x3xf32>) -> (tensor<2x3xf32> {jax.result_info = "result[0]"}, tensor<2x3xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.atan2 %arg1, %arg0 : tensor<2x3xf32>
    %1 = chlo.square %arg1 : tensor<2x3xf32> -> tensor<2x3xf32>
    %2 = chlo.square %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %3 = stablehlo.add %1, %2 : tensor<2x3xf32>
    %4 = stablehlo.divide %arg0, %3 : tensor<2x3xf32>
    %5 = stablehlo.negate %arg1 : tensor<2x3xf32>
    %6 = chlo.square %arg1 : tensor<2x3xf32> -> tensor<2x3xf32>
    %7 = chlo.square %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %8 = stablehlo.add %6, %7 : tensor<2x3xf32>
    %9 = stablehlo.divide %5, %8 : tensor<2x3xf32>
    %10 = stablehlo.multiply %arg0, %arg0 : tensor<2x3xf32>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %12 = stablehlo.add %10, %11 : tensor<2x3xf32>
    %13 = chlo.lgamma %12 : tensor<2x3xf32> -> tensor<2x3xf32>
    %14 = chlo.lgamma %12 : tensor<2x3xf32> -> tensor<2x3xf32>
    %15 = chlo.cosh %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %16 = chlo.sinh %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %cst_0 = stablehlo.constant dense<2.500000e-01> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %18 = stablehlo.add %15, %17 : tensor<2x3xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %20 = chlo.polygamma %19, %18 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %21 = chlo.asinh %arg1 : tensor<2x3xf32> -> tensor<2x3xf32>
    %22 = chlo.square %arg1 : tensor<2x3xf32> -> tensor<2x3xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %24 = stablehlo.add %22, %23 : tensor<2x3xf32>
    %25 = stablehlo.rsqrt %24 : tensor<2x3xf32>
    %cst_3 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %27 = stablehlo.multiply %26, %arg1 : tensor<2x3xf32>
    %28 = chlo.sinh %27 : tensor<2x3xf32> -> tensor<2x3xf32>
    %29 = chlo.cosh %27 : tensor<2x3xf32> -> tensor<2x3xf32>
    %30 = stablehlo.multiply %21, %arg2 : tensor<2x3xf32>
    %31 = stablehlo.multiply %arg2, %28 : tensor<2x3xf32>
    %32 = stablehlo.multiply %30, %29 : tensor<2x3xf32>
    %cst_4 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %34 = stablehlo.multiply %33, %32 : tensor<2x3xf32>
    %35 = stablehlo.multiply %31, %25 : tensor<2x3xf32>
    %36 = stablehlo.add %34, %35 : tensor<2x3xf32>
    %37 = stablehlo.multiply %arg2, %20 : tensor<2x3xf32>
    %38 = stablehlo.multiply %37, %16 : tensor<2x3xf32>
    %39 = stablehlo.multiply %0, %arg2 : tensor<2x3xf32>
    %40 = stablehlo.multiply %arg2, %13 : tensor<2x3xf32>
    %41 = stablehlo.multiply %39, %14 : tensor<2x3xf32>
    %42 = stablehlo.multiply %arg0, %41 : tensor<2x3xf32>
    %43 = stablehlo.add %38, %42 : tensor<2x3xf32>
    %44 = stablehlo.multiply %41, %arg0 : tensor<2x3xf32>
    %45 = stablehlo.add %43, %44 : tensor<2x3xf32>
    %46 = stablehlo.multiply %40, %9 : tensor<2x3xf32>
    %47 = stablehlo.add %45, %46 : tensor<2x3xf32>
    %48 = stablehlo.multiply %40, %4 : tensor<2x3xf32>
    %49 = stablehlo.add %36, %48 : tensor<2x3xf32>
    return %47, %49 : tensor<2x3xf32>, tensor<2x3xf32>
  }
}
