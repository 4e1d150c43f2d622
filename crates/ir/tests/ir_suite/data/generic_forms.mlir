// Every op in MLIR's generic form, with the older attribute spellings
// (dense<…> : tensor<…> instead of array<i64: …>, attributes in {…} after the
// operands instead of <{…}> properties).
module {
  func.func @generic(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<1x3x8x8xf32>, %arg3: tensor<4x3x3x3xf32>) -> (tensor<2xf32>, tensor<1x4x4x4xf32>) {
    %0 = "stablehlo.constant"() <{value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}> : () -> tensor<3xf32>
    %1 = "stablehlo.add"(%arg1, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = "stablehlo.broadcast_in_dim"(%1) {broadcast_dimensions = dense<1> : tensor<1xi64>} : (tensor<3xf32>) -> tensor<2x3xf32>
    %3 = "stablehlo.compare"(%arg0, %2) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %4 = "stablehlo.select"(%3, %arg0, %2) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = "stablehlo.transpose"(%4) {permutation = dense<[1, 0]> : tensor<2xi64>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %6 = "stablehlo.reverse"(%5) <{dimensions = array<i64: 0>}> : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %7 = "stablehlo.slice"(%6) {start_indices = dense<[0, 0]> : tensor<2xi64>, limit_indices = dense<[3, 2]> : tensor<2xi64>, strides = dense<[2, 1]> : tensor<2xi64>} : (tensor<3x2xf32>) -> tensor<2x2xf32>
    %8 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %9 = "stablehlo.pad"(%7, %8) {edge_padding_low = dense<[0, 1]> : tensor<2xi64>, edge_padding_high = dense<0> : tensor<2xi64>, interior_padding = dense<[1, 0]> : tensor<2xi64>} : (tensor<2x2xf32>, tensor<f32>) -> tensor<3x3xf32>
    %10 = "stablehlo.concatenate"(%9, %9) {dimension = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x6xf32>
    %11 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3xi32>
    %12 = "stablehlo.convert"(%11) : (tensor<3xi32>) -> tensor<3xf32>
    %13 = "stablehlo.dot_general"(%arg0, %arg0) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>
    %14 = "stablehlo.convolution"(%arg2, %arg3) {batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, feature_group_count = 1 : i64, padding = dense<1> : tensor<2x2xi64>, rhs_dilation = dense<1> : tensor<2xi64>, window_strides = dense<2> : tensor<2xi64>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
    %15 = "stablehlo.reduce"(%arg0, %8) ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %18 = "stablehlo.add"(%arg4, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%18) : (tensor<f32>) -> ()
    }) {dimensions = dense<1> : tensor<1xi64>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %16 = "stablehlo.reduce_window"(%14, %8) ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %18 = "stablehlo.maximum"(%arg4, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%18) : (tensor<f32>) -> ()
    }) {window_dimensions = dense<[1, 1, 3, 3]> : tensor<4xi64>, window_strides = dense<1> : tensor<4xi64>, padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>, base_dilations = dense<1> : tensor<4xi64>} : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
    %17 = "func.call"(%15) <{callee = @id}> : (tensor<2xf32>) -> tensor<2xf32>
    %19 = "chlo.erf"(%17) : (tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%19, %16) : (tensor<2xf32>, tensor<1x4x4x4xf32>) -> ()
  }
  func.func private @id(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = chlo.square %arg0 : tensor<2xf32> -> tensor<2xf32>
    %1 = chlo.erf %0 : tensor<2xf32> -> tensor<2xf32>
    return %arg0 : tensor<2xf32>
  }
}
