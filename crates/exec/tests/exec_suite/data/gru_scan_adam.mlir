module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<12x4xf32>, %arg2: tensor<12xf32>, %arg3: tensor<12x12xf32>, %arg4: tensor<12x12xf32>, %arg5: tensor<12x12xf32>, %arg6: tensor<12xf32>, %arg7: tensor<4x12xf32>, %arg8: tensor<12xf32>, %arg9: tensor<4x12xf32>, %arg10: tensor<12xf32>, %arg11: tensor<4x12xf32>, %arg12: tensor<i32>, %arg13: tensor<4xf32>, %arg14: tensor<12x4xf32>, %arg15: tensor<12xf32>, %arg16: tensor<12x12xf32>, %arg17: tensor<12x12xf32>, %arg18: tensor<12x12xf32>, %arg19: tensor<12xf32>, %arg20: tensor<4x12xf32>, %arg21: tensor<12xf32>, %arg22: tensor<4x12xf32>, %arg23: tensor<12xf32>, %arg24: tensor<4x12xf32>, %arg25: tensor<4xf32>, %arg26: tensor<12x4xf32>, %arg27: tensor<12xf32>, %arg28: tensor<12x12xf32>, %arg29: tensor<12x12xf32>, %arg30: tensor<12x12xf32>, %arg31: tensor<12xf32>, %arg32: tensor<4x12xf32>, %arg33: tensor<12xf32>, %arg34: tensor<4x12xf32>, %arg35: tensor<12xf32>, %arg36: tensor<4x12xf32>, %arg37: tensor<3x5x4xf32>, %arg38: tensor<3xi32>) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<12x4xf32> {jax.result_info = "result[1]"}, tensor<12xf32> {jax.result_info = "result[2]"}, tensor<12x12xf32> {jax.result_info = "result[3]"}, tensor<12x12xf32> {jax.result_info = "result[4]"}, tensor<12x12xf32> {jax.result_info = "result[5]"}, tensor<12xf32> {jax.result_info = "result[6]"}, tensor<4x12xf32> {jax.result_info = "result[7]"}, tensor<12xf32> {jax.result_info = "result[8]"}, tensor<4x12xf32> {jax.result_info = "result[9]"}, tensor<12xf32> {jax.result_info = "result[10]"}, tensor<4x12xf32> {jax.result_info = "result[11]"}, tensor<i32> {jax.result_info = "result[12]"}, tensor<4xf32> {jax.result_info = "result[13]"}, tensor<12x4xf32> {jax.result_info = "result[14]"}, tensor<12xf32> {jax.result_info = "result[15]"}, tensor<12x12xf32> {jax.result_info = "result[16]"}, tensor<12x12xf32> {jax.result_info = "result[17]"}, tensor<12x12xf32> {jax.result_info = "result[18]"}, tensor<12xf32> {jax.result_info = "result[19]"}, tensor<4x12xf32> {jax.result_info = "result[20]"}, tensor<12xf32> {jax.result_info = "result[21]"}, tensor<4x12xf32> {jax.result_info = "result[22]"}, tensor<12xf32> {jax.result_info = "result[23]"}, tensor<4x12xf32> {jax.result_info = "result[24]"}, tensor<4xf32> {jax.result_info = "result[25]"}, tensor<12x4xf32> {jax.result_info = "result[26]"}, tensor<12xf32> {jax.result_info = "result[27]"}, tensor<12x12xf32> {jax.result_info = "result[28]"}, tensor<12x12xf32> {jax.result_info = "result[29]"}, tensor<12x12xf32> {jax.result_info = "result[30]"}, tensor<12xf32> {jax.result_info = "result[31]"}, tensor<4x12xf32> {jax.result_info = "result[32]"}, tensor<12xf32> {jax.result_info = "result[33]"}, tensor<4x12xf32> {jax.result_info = "result[34]"}, tensor<12xf32> {jax.result_info = "result[35]"}, tensor<4x12xf32> {jax.result_info = "result[36]"}, tensor<f32> {jax.result_info = "result[37]"}, tensor<f32> {jax.result_info = "result[38]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<32> : tensor<i32>
    %0 = stablehlo.shift_right_logical %c, %c_0 : tensor<i32>
    %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<ui32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<ui32>) -> tensor<1xui32>
    %c_1 = stablehlo.constant dense<-1> : tensor<i32>
    %3 = stablehlo.and %c, %c_1 : tensor<i32>
    %4 = stablehlo.convert %3 : (tensor<i32>) -> tensor<ui32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<ui32>) -> tensor<1xui32>
    %6 = stablehlo.concatenate %2, %5, dim = 0 : (tensor<1xui32>, tensor<1xui32>) -> tensor<2xui32>
    %7 = stablehlo.slice %arg37 [0:3, 0:1, 0:4] : (tensor<3x5x4xf32>) -> tensor<3x1x4xf32>
    %8 = stablehlo.reshape %7 : (tensor<3x1x4xf32>) -> tensor<3x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %10 = stablehlo.transpose %arg37, dims = [1, 0, 2] : (tensor<3x5x4xf32>) -> tensor<5x3x4xf32>
    %11 = stablehlo.reshape %arg8 : (tensor<12xf32>) -> tensor<1x12xf32>
    %12 = stablehlo.reshape %arg10 : (tensor<12xf32>) -> tensor<1x12xf32>
    %13 = stablehlo.reshape %arg6 : (tensor<12xf32>) -> tensor<1x12xf32>
    %14 = stablehlo.reshape %arg2 : (tensor<12xf32>) -> tensor<1x12xf32>
    %15 = stablehlo.reshape %arg8 : (tensor<12xf32>) -> tensor<1x12xf32>
    %16 = stablehlo.reshape %arg10 : (tensor<12xf32>) -> tensor<1x12xf32>
    %17 = stablehlo.reshape %arg6 : (tensor<12xf32>) -> tensor<1x12xf32>
    %18 = stablehlo.reshape %arg2 : (tensor<12xf32>) -> tensor<1x12xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %28 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<5x3x12xf32>
    %c_12 = stablehlo.constant dense<0> : tensor<i32>
    %29:23 = stablehlo.while(%iterArg = %10, %iterArg_137 = %arg11, %iterArg_138 = %16, %iterArg_139 = %arg5, %iterArg_140 = %arg7, %iterArg_141 = %17, %iterArg_142 = %arg9, %iterArg_143 = %15, %iterArg_144 = %arg4, %iterArg_145 = %arg3, %iterArg_146 = %18, %iterArg_147 = %c_12, %iterArg_148 = %9, %iterArg_149 = %19, %iterArg_150 = %20, %iterArg_151 = %21, %iterArg_152 = %22, %iterArg_153 = %23, %iterArg_154 = %24, %iterArg_155 = %25, %iterArg_156 = %26, %iterArg_157 = %27, %iterArg_158 = %28) : tensor<5x3x4xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<1x12xf32>, tensor<i32>, tensor<3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>
    cond {
      %c_159 = stablehlo.constant dense<5> : tensor<i32>
      %411 = stablehlo.compare LT, %iterArg_147, %c_159, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %411 : tensor<i1>
    } do {
      %411 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_147) : (tensor<5x3x4xf32>, tensor<i32>) -> tensor<3x4xf32>
      %412:11 = func.call @closed_call(%iterArg_137, %iterArg_138, %iterArg_139, %iterArg_140, %iterArg_141, %iterArg_142, %iterArg_143, %iterArg_144, %iterArg_145, %iterArg_146, %iterArg_148, %411) : (tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<1x12xf32>, tensor<3x12xf32>, tensor<3x4xf32>) -> (tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>)
      %413 = func.call @dynamic_update_index_in_dim(%iterArg_149, %412#1, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %414 = func.call @dynamic_update_index_in_dim(%iterArg_150, %412#2, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %415 = func.call @dynamic_update_index_in_dim(%iterArg_151, %412#3, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %416 = func.call @dynamic_update_index_in_dim(%iterArg_152, %412#4, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %417 = func.call @dynamic_update_index_in_dim(%iterArg_153, %412#5, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %418 = func.call @dynamic_update_index_in_dim(%iterArg_154, %412#6, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %419 = func.call @dynamic_update_index_in_dim(%iterArg_155, %412#7, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %420 = func.call @dynamic_update_index_in_dim(%iterArg_156, %412#8, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %421 = func.call @dynamic_update_index_in_dim(%iterArg_157, %412#9, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %422 = func.call @dynamic_update_index_in_dim(%iterArg_158, %412#10, %iterArg_147) : (tensor<5x3x12xf32>, tensor<3x12xf32>, tensor<i32>) -> tensor<5x3x12xf32>
      %c_159 = stablehlo.constant dense<1> : tensor<i32>
      %423 = stablehlo.add %iterArg_147, %c_159 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_137, %iterArg_138, %iterArg_139, %iterArg_140, %iterArg_141, %iterArg_142, %iterArg_143, %iterArg_144, %iterArg_145, %iterArg_146, %423, %412#0, %413, %414, %415, %416, %417, %418, %419, %420, %421, %422 : tensor<5x3x4xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<4x12xf32>, tensor<1x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<1x12xf32>, tensor<i32>, tensor<3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>
    }
    %30 = stablehlo.transpose %29#13, dims = [1, 0, 2] : (tensor<5x3x12xf32>) -> tensor<3x5x12xf32>
    %31 = stablehlo.dot_general %29#12, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x4xf32>) -> tensor<3x4xf32>
    %32 = stablehlo.reshape %arg0 : (tensor<4xf32>) -> tensor<1x4xf32>
    %33 = stablehlo.broadcast_in_dim %32, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<3x4xf32>
    %34 = stablehlo.add %31, %33 : tensor<3x4xf32>
    %35 = stablehlo.broadcast_in_dim %arg38, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %36:2 = call @take_along_axis(%34, %35) : (tensor<3x4xf32>, tensor<3x1xi32>) -> (tensor<3x1xf32>, tensor<3x1x1xi32>)
    %c_13 = stablehlo.constant dense<0> : tensor<i32>
    %37:2 = call @_take(%36#0, %c_13) : (tensor<3x1xf32>, tensor<i32>) -> (tensor<3xf32>, tensor<1xi32>)
    %cst_14 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %38 = stablehlo.reduce(%34 init: %cst_14) applies stablehlo.maximum across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
    %39 = stablehlo.reshape %38 : (tensor<3xf32>) -> tensor<3x1xf32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [0, 1] : (tensor<3x1xf32>) -> tensor<3x4xf32>
    %41 = stablehlo.compare EQ, %34, %40, FLOAT : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
    %42 = stablehlo.convert %41 : (tensor<3x4xi1>) -> tensor<3x4xf32>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %43 = stablehlo.reduce(%42 init: %cst_15) applies stablehlo.add across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
    %cst_16 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %44 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %45 = stablehlo.maximum %44, %38 : tensor<3xf32>
    %46 = stablehlo.compare EQ, %38, %45, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %cst_18 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %49 = stablehlo.select %46, %47, %48 : tensor<3xi1>, tensor<3xf32>
    %cst_19 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %51 = stablehlo.compare EQ, %50, %45, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %cst_20 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %52 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %cst_21 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %53 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %54 = stablehlo.select %51, %52, %53 : tensor<3xi1>, tensor<3xf32>
    %55 = stablehlo.divide %49, %54 : tensor<3xf32>
    %56 = stablehlo.is_finite %45 : (tensor<3xf32>) -> tensor<3xi1>
    %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %57 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %58 = stablehlo.select %56, %45, %57 : tensor<3xi1>, tensor<3xf32>
    %cst_23 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %59 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %60 = stablehlo.broadcast_in_dim %58, dims = [0] : (tensor<3xf32>) -> tensor<3x1xf32>
    %61 = stablehlo.broadcast_in_dim %60, dims = [0, 1] : (tensor<3x1xf32>) -> tensor<3x4xf32>
    %62 = stablehlo.subtract %34, %61 : tensor<3x4xf32>
    %63 = stablehlo.exponential %62 : tensor<3x4xf32>
    %cst_24 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %64 = stablehlo.reduce(%63 init: %cst_24) applies stablehlo.add across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
    %65 = stablehlo.sign %64 : tensor<3xf32>
    %66 = stablehlo.abs %64 : tensor<3xf32>
    %cst_25 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %67 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %68 = stablehlo.compare GE, %64, %67, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %69 = stablehlo.log %66 : tensor<3xf32>
    %70 = stablehlo.add %69, %58 : tensor<3xf32>
    %71 = stablehlo.subtract %70, %37#0 : tensor<3xf32>
    %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %72 = stablehlo.reduce(%71 init: %cst_26) applies stablehlo.add across dimensions = [0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
    %cst_27 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %73 = stablehlo.divide %72, %cst_27 : tensor<f32>
    %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %74 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %cst_29 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_30 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %75 = stablehlo.divide %cst_29, %cst_30 : tensor<f32>
    %76 = stablehlo.broadcast_in_dim %75, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %77 = stablehlo.negate %76 : tensor<3xf32>
    %78 = stablehlo.divide %76, %66 : tensor<3xf32>
    %cst_31 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %79 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %80 = stablehlo.select %68, %79, %78 : tensor<3xi1>, tensor<3xf32>
    %81 = stablehlo.select %68, %78, %79 : tensor<3xi1>, tensor<3xf32>
    %82 = stablehlo.negate %80 : tensor<3xf32>
    %83 = stablehlo.add %81, %82 : tensor<3xf32>
    %84 = stablehlo.broadcast_in_dim %83, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
    %85 = stablehlo.multiply %84, %63 : tensor<3x4xf32>
    %86 = call @_take_0(%37#1, %77) : (tensor<1xi32>, tensor<3xf32>) -> tensor<3x1xf32>
    %87 = call @take_along_axis_1(%36#1, %86) : (tensor<3x1x1xi32>, tensor<3x1xf32>) -> tensor<3x4xf32>
    %88 = stablehlo.add %85, %87 : tensor<3x4xf32>
    %cst_32 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %89 = stablehlo.reduce(%88 init: %cst_32) applies stablehlo.add across dimensions = [0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<4xf32>
    %90 = stablehlo.reshape %89 : (tensor<4xf32>) -> tensor<1x4xf32>
    %91 = stablehlo.reshape %90 : (tensor<1x4xf32>) -> tensor<4xf32>
    %92 = stablehlo.dot_general %88, %29#12, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<3x12xf32>) -> tensor<4x12xf32>
    %93 = stablehlo.transpose %92, dims = [1, 0] : (tensor<4x12xf32>) -> tensor<12x4xf32>
    %94 = stablehlo.dot_general %88, %arg1, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<12x4xf32>) -> tensor<3x12xf32>
    %cst_33 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %95 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %cst_34 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %96 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %cst_35 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %97 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %cst_36 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %98 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %cst_37 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %99 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %cst_38 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %100 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %cst_39 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %101 = stablehlo.broadcast_in_dim %cst_39, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %cst_40 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %102 = stablehlo.broadcast_in_dim %cst_40, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %cst_41 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %103 = stablehlo.broadcast_in_dim %cst_41, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %cst_42 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %104 = stablehlo.broadcast_in_dim %cst_42, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %c_43 = stablehlo.constant dense<0> : tensor<i32>
    %105:25 = stablehlo.while(%iterArg = %10, %iterArg_137 = %29#14, %iterArg_138 = %29#15, %iterArg_139 = %29#16, %iterArg_140 = %29#17, %iterArg_141 = %29#18, %iterArg_142 = %29#19, %iterArg_143 = %29#20, %iterArg_144 = %29#21, %iterArg_145 = %29#22, %iterArg_146 = %arg4, %iterArg_147 = %arg5, %iterArg_148 = %arg3, %iterArg_149 = %c_43, %iterArg_150 = %95, %iterArg_151 = %96, %iterArg_152 = %97, %iterArg_153 = %98, %iterArg_154 = %99, %iterArg_155 = %100, %iterArg_156 = %101, %iterArg_157 = %102, %iterArg_158 = %103, %iterArg_159 = %104, %iterArg_160 = %94) : tensor<5x3x4xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<i32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>
    cond {
      %c_161 = stablehlo.constant dense<5> : tensor<i32>
      %411 = stablehlo.compare LT, %iterArg_149, %c_161, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %411 : tensor<i1>
    } do {
      %c_161 = stablehlo.constant dense<5> : tensor<i32>
      %411 = stablehlo.subtract %c_161, %iterArg_149 : tensor<i32>
      %c_162 = stablehlo.constant dense<1> : tensor<i32>
      %412 = stablehlo.subtract %411, %c_162 : tensor<i32>
      %413 = func.call @dynamic_index_in_dim(%iterArg, %412) : (tensor<5x3x4xf32>, tensor<i32>) -> tensor<3x4xf32>
      %414 = func.call @dynamic_index_in_dim_2(%iterArg_137, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %415 = func.call @dynamic_index_in_dim_2(%iterArg_138, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %416 = func.call @dynamic_index_in_dim_2(%iterArg_139, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %417 = func.call @dynamic_index_in_dim_2(%iterArg_140, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %418 = func.call @dynamic_index_in_dim_2(%iterArg_141, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %419 = func.call @dynamic_index_in_dim_2(%iterArg_142, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %420 = func.call @dynamic_index_in_dim_2(%iterArg_143, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %421 = func.call @dynamic_index_in_dim_2(%iterArg_144, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %422 = func.call @dynamic_index_in_dim_2(%iterArg_145, %412) : (tensor<5x3x12xf32>, tensor<i32>) -> tensor<3x12xf32>
      %423:11 = func.call @closed_call_3(%iterArg_146, %iterArg_147, %iterArg_148, %iterArg_150, %iterArg_151, %iterArg_152, %iterArg_153, %iterArg_154, %iterArg_155, %iterArg_156, %iterArg_157, %iterArg_158, %iterArg_159, %iterArg_160, %413, %414, %415, %416, %417, %418, %419, %420, %421, %422) : (tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>, tensor<3x4xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>) -> (tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>)
      %c_163 = stablehlo.constant dense<1> : tensor<i32>
      %424 = stablehlo.add %iterArg_149, %c_163 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_137, %iterArg_138, %iterArg_139, %iterArg_140, %iterArg_141, %iterArg_142, %iterArg_143, %iterArg_144, %iterArg_145, %iterArg_146, %iterArg_147, %iterArg_148, %424, %423#0, %423#1, %423#2, %423#3, %423#4, %423#5, %423#6, %423#7, %423#8, %423#9, %423#10 : tensor<5x3x4xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<5x3x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<i32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>
    }
    %cst_44 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %106 = stablehlo.broadcast_in_dim %cst_44, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %107 = stablehlo.multiply %106, %91 : tensor<4xf32>
    %cst_45 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %108 = stablehlo.broadcast_in_dim %cst_45, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %109 = stablehlo.multiply %108, %arg13 : tensor<4xf32>
    %110 = stablehlo.add %107, %109 : tensor<4xf32>
    %cst_46 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %111 = stablehlo.broadcast_in_dim %cst_46, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %112 = stablehlo.multiply %111, %93 : tensor<12x4xf32>
    %cst_47 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %113 = stablehlo.broadcast_in_dim %cst_47, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %114 = stablehlo.multiply %113, %arg14 : tensor<12x4xf32>
    %115 = stablehlo.add %112, %114 : tensor<12x4xf32>
    %cst_48 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %116 = stablehlo.broadcast_in_dim %cst_48, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %117 = stablehlo.multiply %116, %105#23 : tensor<12xf32>
    %cst_49 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %118 = stablehlo.broadcast_in_dim %cst_49, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %119 = stablehlo.multiply %118, %arg15 : tensor<12xf32>
    %120 = stablehlo.add %117, %119 : tensor<12xf32>
    %cst_50 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %121 = stablehlo.broadcast_in_dim %cst_50, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %122 = stablehlo.multiply %121, %105#22 : tensor<12x12xf32>
    %cst_51 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %123 = stablehlo.broadcast_in_dim %cst_51, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %124 = stablehlo.multiply %123, %arg16 : tensor<12x12xf32>
    %125 = stablehlo.add %122, %124 : tensor<12x12xf32>
    %cst_52 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %126 = stablehlo.broadcast_in_dim %cst_52, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %127 = stablehlo.multiply %126, %105#16 : tensor<12x12xf32>
    %cst_53 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %128 = stablehlo.broadcast_in_dim %cst_53, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %129 = stablehlo.multiply %128, %arg17 : tensor<12x12xf32>
    %130 = stablehlo.add %127, %129 : tensor<12x12xf32>
    %cst_54 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %131 = stablehlo.broadcast_in_dim %cst_54, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %132 = stablehlo.multiply %131, %105#19 : tensor<12x12xf32>
    %cst_55 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %133 = stablehlo.broadcast_in_dim %cst_55, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %134 = stablehlo.multiply %133, %arg18 : tensor<12x12xf32>
    %135 = stablehlo.add %132, %134 : tensor<12x12xf32>
    %cst_56 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %136 = stablehlo.broadcast_in_dim %cst_56, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %137 = stablehlo.multiply %136, %105#21 : tensor<12xf32>
    %cst_57 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %138 = stablehlo.broadcast_in_dim %cst_57, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %139 = stablehlo.multiply %138, %arg19 : tensor<12xf32>
    %140 = stablehlo.add %137, %139 : tensor<12xf32>
    %cst_58 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %141 = stablehlo.broadcast_in_dim %cst_58, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %142 = stablehlo.multiply %141, %105#20 : tensor<4x12xf32>
    %cst_59 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %143 = stablehlo.broadcast_in_dim %cst_59, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %144 = stablehlo.multiply %143, %arg20 : tensor<4x12xf32>
    %145 = stablehlo.add %142, %144 : tensor<4x12xf32>
    %cst_60 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %146 = stablehlo.broadcast_in_dim %cst_60, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %147 = stablehlo.multiply %146, %105#15 : tensor<12xf32>
    %cst_61 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %148 = stablehlo.broadcast_in_dim %cst_61, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %149 = stablehlo.multiply %148, %arg21 : tensor<12xf32>
    %150 = stablehlo.add %147, %149 : tensor<12xf32>
    %cst_62 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %151 = stablehlo.broadcast_in_dim %cst_62, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %152 = stablehlo.multiply %151, %105#14 : tensor<4x12xf32>
    %cst_63 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %153 = stablehlo.broadcast_in_dim %cst_63, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %154 = stablehlo.multiply %153, %arg22 : tensor<4x12xf32>
    %155 = stablehlo.add %152, %154 : tensor<4x12xf32>
    %cst_64 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %156 = stablehlo.broadcast_in_dim %cst_64, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %157 = stablehlo.multiply %156, %105#18 : tensor<12xf32>
    %cst_65 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %158 = stablehlo.broadcast_in_dim %cst_65, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %159 = stablehlo.multiply %158, %arg23 : tensor<12xf32>
    %160 = stablehlo.add %157, %159 : tensor<12xf32>
    %cst_66 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %161 = stablehlo.broadcast_in_dim %cst_66, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %162 = stablehlo.multiply %161, %105#17 : tensor<4x12xf32>
    %cst_67 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %163 = stablehlo.broadcast_in_dim %cst_67, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %164 = stablehlo.multiply %163, %arg24 : tensor<4x12xf32>
    %165 = stablehlo.add %162, %164 : tensor<4x12xf32>
    %166 = stablehlo.multiply %91, %91 : tensor<4xf32>
    %cst_68 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %167 = stablehlo.broadcast_in_dim %cst_68, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %168 = stablehlo.multiply %167, %166 : tensor<4xf32>
    %cst_69 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %169 = stablehlo.broadcast_in_dim %cst_69, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %170 = stablehlo.multiply %169, %arg25 : tensor<4xf32>
    %171 = stablehlo.add %168, %170 : tensor<4xf32>
    %172 = stablehlo.multiply %93, %93 : tensor<12x4xf32>
    %cst_70 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %173 = stablehlo.broadcast_in_dim %cst_70, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %174 = stablehlo.multiply %173, %172 : tensor<12x4xf32>
    %cst_71 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %175 = stablehlo.broadcast_in_dim %cst_71, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %176 = stablehlo.multiply %175, %arg26 : tensor<12x4xf32>
    %177 = stablehlo.add %174, %176 : tensor<12x4xf32>
    %178 = stablehlo.multiply %105#23, %105#23 : tensor<12xf32>
    %cst_72 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %179 = stablehlo.broadcast_in_dim %cst_72, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %180 = stablehlo.multiply %179, %178 : tensor<12xf32>
    %cst_73 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %181 = stablehlo.broadcast_in_dim %cst_73, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %182 = stablehlo.multiply %181, %arg27 : tensor<12xf32>
    %183 = stablehlo.add %180, %182 : tensor<12xf32>
    %184 = stablehlo.multiply %105#22, %105#22 : tensor<12x12xf32>
    %cst_74 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %185 = stablehlo.broadcast_in_dim %cst_74, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %186 = stablehlo.multiply %185, %184 : tensor<12x12xf32>
    %cst_75 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %187 = stablehlo.broadcast_in_dim %cst_75, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %188 = stablehlo.multiply %187, %arg28 : tensor<12x12xf32>
    %189 = stablehlo.add %186, %188 : tensor<12x12xf32>
    %190 = stablehlo.multiply %105#16, %105#16 : tensor<12x12xf32>
    %cst_76 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %191 = stablehlo.broadcast_in_dim %cst_76, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %192 = stablehlo.multiply %191, %190 : tensor<12x12xf32>
    %cst_77 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %193 = stablehlo.broadcast_in_dim %cst_77, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %194 = stablehlo.multiply %193, %arg29 : tensor<12x12xf32>
    %195 = stablehlo.add %192, %194 : tensor<12x12xf32>
    %196 = stablehlo.multiply %105#19, %105#19 : tensor<12x12xf32>
    %cst_78 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %197 = stablehlo.broadcast_in_dim %cst_78, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %198 = stablehlo.multiply %197, %196 : tensor<12x12xf32>
    %cst_79 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %199 = stablehlo.broadcast_in_dim %cst_79, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %200 = stablehlo.multiply %199, %arg30 : tensor<12x12xf32>
    %201 = stablehlo.add %198, %200 : tensor<12x12xf32>
    %202 = stablehlo.multiply %105#21, %105#21 : tensor<12xf32>
    %cst_80 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %203 = stablehlo.broadcast_in_dim %cst_80, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %204 = stablehlo.multiply %203, %202 : tensor<12xf32>
    %cst_81 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %205 = stablehlo.broadcast_in_dim %cst_81, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %206 = stablehlo.multiply %205, %arg31 : tensor<12xf32>
    %207 = stablehlo.add %204, %206 : tensor<12xf32>
    %208 = stablehlo.multiply %105#20, %105#20 : tensor<4x12xf32>
    %cst_82 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %209 = stablehlo.broadcast_in_dim %cst_82, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %210 = stablehlo.multiply %209, %208 : tensor<4x12xf32>
    %cst_83 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %211 = stablehlo.broadcast_in_dim %cst_83, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %212 = stablehlo.multiply %211, %arg32 : tensor<4x12xf32>
    %213 = stablehlo.add %210, %212 : tensor<4x12xf32>
    %214 = stablehlo.multiply %105#15, %105#15 : tensor<12xf32>
    %cst_84 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %215 = stablehlo.broadcast_in_dim %cst_84, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %216 = stablehlo.multiply %215, %214 : tensor<12xf32>
    %cst_85 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %217 = stablehlo.broadcast_in_dim %cst_85, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %218 = stablehlo.multiply %217, %arg33 : tensor<12xf32>
    %219 = stablehlo.add %216, %218 : tensor<12xf32>
    %220 = stablehlo.multiply %105#14, %105#14 : tensor<4x12xf32>
    %cst_86 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %221 = stablehlo.broadcast_in_dim %cst_86, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %222 = stablehlo.multiply %221, %220 : tensor<4x12xf32>
    %cst_87 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %223 = stablehlo.broadcast_in_dim %cst_87, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %224 = stablehlo.multiply %223, %arg34 : tensor<4x12xf32>
    %225 = stablehlo.add %222, %224 : tensor<4x12xf32>
    %226 = stablehlo.multiply %105#18, %105#18 : tensor<12xf32>
    %cst_88 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %227 = stablehlo.broadcast_in_dim %cst_88, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %228 = stablehlo.multiply %227, %226 : tensor<12xf32>
    %cst_89 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %229 = stablehlo.broadcast_in_dim %cst_89, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %230 = stablehlo.multiply %229, %arg35 : tensor<12xf32>
    %231 = stablehlo.add %228, %230 : tensor<12xf32>
    %232 = stablehlo.multiply %105#17, %105#17 : tensor<4x12xf32>
    %cst_90 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %233 = stablehlo.broadcast_in_dim %cst_90, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %234 = stablehlo.multiply %233, %232 : tensor<4x12xf32>
    %cst_91 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %235 = stablehlo.broadcast_in_dim %cst_91, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %236 = stablehlo.multiply %235, %arg36 : tensor<4x12xf32>
    %237 = stablehlo.add %234, %236 : tensor<4x12xf32>
    %c_92 = stablehlo.constant dense<2147483647> : tensor<i32>
    %238 = stablehlo.compare LT, %arg12, %c_92, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_93 = stablehlo.constant dense<1> : tensor<i32>
    %239 = stablehlo.add %arg12, %c_93 : tensor<i32>
    %c_94 = stablehlo.constant dense<2147483647> : tensor<i32>
    %240 = call @_where_4(%238, %239, %c_94) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %241 = stablehlo.convert %240 : (tensor<i32>) -> tensor<f32>
    %cst_95 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %242 = stablehlo.convert %240 : (tensor<i32>) -> tensor<f32>
    %243 = stablehlo.power %cst_95, %242 : tensor<f32>
    %cst_96 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %244 = stablehlo.subtract %cst_96, %243 : tensor<f32>
    %245 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %246 = stablehlo.divide %110, %245 : tensor<4xf32>
    %247 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %248 = stablehlo.divide %115, %247 : tensor<12x4xf32>
    %249 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %250 = stablehlo.divide %120, %249 : tensor<12xf32>
    %251 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %252 = stablehlo.divide %125, %251 : tensor<12x12xf32>
    %253 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %254 = stablehlo.divide %130, %253 : tensor<12x12xf32>
    %255 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %256 = stablehlo.divide %135, %255 : tensor<12x12xf32>
    %257 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %258 = stablehlo.divide %140, %257 : tensor<12xf32>
    %259 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %260 = stablehlo.divide %145, %259 : tensor<4x12xf32>
    %261 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %262 = stablehlo.divide %150, %261 : tensor<12xf32>
    %263 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %264 = stablehlo.divide %155, %263 : tensor<4x12xf32>
    %265 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %266 = stablehlo.divide %160, %265 : tensor<12xf32>
    %267 = stablehlo.broadcast_in_dim %244, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %268 = stablehlo.divide %165, %267 : tensor<4x12xf32>
    %269 = stablehlo.convert %240 : (tensor<i32>) -> tensor<f32>
    %cst_97 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %270 = stablehlo.convert %240 : (tensor<i32>) -> tensor<f32>
    %271 = stablehlo.power %cst_97, %270 : tensor<f32>
    %cst_98 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %272 = stablehlo.subtract %cst_98, %271 : tensor<f32>
    %273 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %274 = stablehlo.divide %171, %273 : tensor<4xf32>
    %275 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %276 = stablehlo.divide %177, %275 : tensor<12x4xf32>
    %277 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %278 = stablehlo.divide %183, %277 : tensor<12xf32>
    %279 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %280 = stablehlo.divide %189, %279 : tensor<12x12xf32>
    %281 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %282 = stablehlo.divide %195, %281 : tensor<12x12xf32>
    %283 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %284 = stablehlo.divide %201, %283 : tensor<12x12xf32>
    %285 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %286 = stablehlo.divide %207, %285 : tensor<12xf32>
    %287 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %288 = stablehlo.divide %213, %287 : tensor<4x12xf32>
    %289 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %290 = stablehlo.divide %219, %289 : tensor<12xf32>
    %291 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %292 = stablehlo.divide %225, %291 : tensor<4x12xf32>
    %293 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %294 = stablehlo.divide %231, %293 : tensor<12xf32>
    %295 = stablehlo.broadcast_in_dim %272, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %296 = stablehlo.divide %237, %295 : tensor<4x12xf32>
    %cst_99 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %297 = stablehlo.broadcast_in_dim %cst_99, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %298 = stablehlo.add %274, %297 : tensor<4xf32>
    %299 = stablehlo.sqrt %298 : tensor<4xf32>
    %cst_100 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %300 = stablehlo.broadcast_in_dim %cst_100, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %301 = stablehlo.add %299, %300 : tensor<4xf32>
    %302 = stablehlo.divide %246, %301 : tensor<4xf32>
    %cst_101 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %303 = stablehlo.broadcast_in_dim %cst_101, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %304 = stablehlo.add %276, %303 : tensor<12x4xf32>
    %305 = stablehlo.sqrt %304 : tensor<12x4xf32>
    %cst_102 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %306 = stablehlo.broadcast_in_dim %cst_102, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %307 = stablehlo.add %305, %306 : tensor<12x4xf32>
    %308 = stablehlo.divide %248, %307 : tensor<12x4xf32>
    %cst_103 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %309 = stablehlo.broadcast_in_dim %cst_103, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %310 = stablehlo.add %278, %309 : tensor<12xf32>
    %311 = stablehlo.sqrt %310 : tensor<12xf32>
    %cst_104 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %312 = stablehlo.broadcast_in_dim %cst_104, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %313 = stablehlo.add %311, %312 : tensor<12xf32>
    %314 = stablehlo.divide %250, %313 : tensor<12xf32>
    %cst_105 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %315 = stablehlo.broadcast_in_dim %cst_105, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %316 = stablehlo.add %280, %315 : tensor<12x12xf32>
    %317 = stablehlo.sqrt %316 : tensor<12x12xf32>
    %cst_106 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %318 = stablehlo.broadcast_in_dim %cst_106, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %319 = stablehlo.add %317, %318 : tensor<12x12xf32>
    %320 = stablehlo.divide %252, %319 : tensor<12x12xf32>
    %cst_107 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %321 = stablehlo.broadcast_in_dim %cst_107, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %322 = stablehlo.add %282, %321 : tensor<12x12xf32>
    %323 = stablehlo.sqrt %322 : tensor<12x12xf32>
    %cst_108 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %324 = stablehlo.broadcast_in_dim %cst_108, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %325 = stablehlo.add %323, %324 : tensor<12x12xf32>
    %326 = stablehlo.divide %254, %325 : tensor<12x12xf32>
    %cst_109 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %327 = stablehlo.broadcast_in_dim %cst_109, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %328 = stablehlo.add %284, %327 : tensor<12x12xf32>
    %329 = stablehlo.sqrt %328 : tensor<12x12xf32>
    %cst_110 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %330 = stablehlo.broadcast_in_dim %cst_110, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %331 = stablehlo.add %329, %330 : tensor<12x12xf32>
    %332 = stablehlo.divide %256, %331 : tensor<12x12xf32>
    %cst_111 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %333 = stablehlo.broadcast_in_dim %cst_111, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %334 = stablehlo.add %286, %333 : tensor<12xf32>
    %335 = stablehlo.sqrt %334 : tensor<12xf32>
    %cst_112 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %336 = stablehlo.broadcast_in_dim %cst_112, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %337 = stablehlo.add %335, %336 : tensor<12xf32>
    %338 = stablehlo.divide %258, %337 : tensor<12xf32>
    %cst_113 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %339 = stablehlo.broadcast_in_dim %cst_113, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %340 = stablehlo.add %288, %339 : tensor<4x12xf32>
    %341 = stablehlo.sqrt %340 : tensor<4x12xf32>
    %cst_114 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %342 = stablehlo.broadcast_in_dim %cst_114, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %343 = stablehlo.add %341, %342 : tensor<4x12xf32>
    %344 = stablehlo.divide %260, %343 : tensor<4x12xf32>
    %cst_115 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %345 = stablehlo.broadcast_in_dim %cst_115, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %346 = stablehlo.add %290, %345 : tensor<12xf32>
    %347 = stablehlo.sqrt %346 : tensor<12xf32>
    %cst_116 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %348 = stablehlo.broadcast_in_dim %cst_116, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %349 = stablehlo.add %347, %348 : tensor<12xf32>
    %350 = stablehlo.divide %262, %349 : tensor<12xf32>
    %cst_117 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %351 = stablehlo.broadcast_in_dim %cst_117, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %352 = stablehlo.add %292, %351 : tensor<4x12xf32>
    %353 = stablehlo.sqrt %352 : tensor<4x12xf32>
    %cst_118 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %354 = stablehlo.broadcast_in_dim %cst_118, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %355 = stablehlo.add %353, %354 : tensor<4x12xf32>
    %356 = stablehlo.divide %264, %355 : tensor<4x12xf32>
    %cst_119 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %357 = stablehlo.broadcast_in_dim %cst_119, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %358 = stablehlo.add %294, %357 : tensor<12xf32>
    %359 = stablehlo.sqrt %358 : tensor<12xf32>
    %cst_120 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %360 = stablehlo.broadcast_in_dim %cst_120, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %361 = stablehlo.add %359, %360 : tensor<12xf32>
    %362 = stablehlo.divide %266, %361 : tensor<12xf32>
    %cst_121 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %363 = stablehlo.broadcast_in_dim %cst_121, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %364 = stablehlo.add %296, %363 : tensor<4x12xf32>
    %365 = stablehlo.sqrt %364 : tensor<4x12xf32>
    %cst_122 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %366 = stablehlo.broadcast_in_dim %cst_122, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %367 = stablehlo.add %365, %366 : tensor<4x12xf32>
    %368 = stablehlo.divide %268, %367 : tensor<4x12xf32>
    %cst_123 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %369 = stablehlo.broadcast_in_dim %cst_123, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %370 = stablehlo.multiply %369, %302 : tensor<4xf32>
    %cst_124 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %371 = stablehlo.broadcast_in_dim %cst_124, dims = [] : (tensor<f32>) -> tensor<12x4xf32>
    %372 = stablehlo.multiply %371, %308 : tensor<12x4xf32>
    %cst_125 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %373 = stablehlo.broadcast_in_dim %cst_125, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %374 = stablehlo.multiply %373, %314 : tensor<12xf32>
    %cst_126 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %375 = stablehlo.broadcast_in_dim %cst_126, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %376 = stablehlo.multiply %375, %320 : tensor<12x12xf32>
    %cst_127 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %377 = stablehlo.broadcast_in_dim %cst_127, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %378 = stablehlo.multiply %377, %326 : tensor<12x12xf32>
    %cst_128 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %379 = stablehlo.broadcast_in_dim %cst_128, dims = [] : (tensor<f32>) -> tensor<12x12xf32>
    %380 = stablehlo.multiply %379, %332 : tensor<12x12xf32>
    %cst_129 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %381 = stablehlo.broadcast_in_dim %cst_129, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %382 = stablehlo.multiply %381, %338 : tensor<12xf32>
    %cst_130 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %383 = stablehlo.broadcast_in_dim %cst_130, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %384 = stablehlo.multiply %383, %344 : tensor<4x12xf32>
    %cst_131 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %385 = stablehlo.broadcast_in_dim %cst_131, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %386 = stablehlo.multiply %385, %350 : tensor<12xf32>
    %cst_132 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %387 = stablehlo.broadcast_in_dim %cst_132, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %388 = stablehlo.multiply %387, %356 : tensor<4x12xf32>
    %cst_133 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %389 = stablehlo.broadcast_in_dim %cst_133, dims = [] : (tensor<f32>) -> tensor<12xf32>
    %390 = stablehlo.multiply %389, %362 : tensor<12xf32>
    %cst_134 = stablehlo.constant dense<-0.00999999977> : tensor<f32>
    %391 = stablehlo.broadcast_in_dim %cst_134, dims = [] : (tensor<f32>) -> tensor<4x12xf32>
    %392 = stablehlo.multiply %391, %368 : tensor<4x12xf32>
    %393 = stablehlo.add %arg0, %370 : tensor<4xf32>
    %394 = stablehlo.add %arg1, %372 : tensor<12x4xf32>
    %395 = stablehlo.add %arg2, %374 : tensor<12xf32>
    %396 = stablehlo.add %arg3, %376 : tensor<12x12xf32>
    %397 = stablehlo.add %arg4, %378 : tensor<12x12xf32>
    %398 = stablehlo.add %arg5, %380 : tensor<12x12xf32>
    %399 = stablehlo.add %arg6, %382 : tensor<12xf32>
    %400 = stablehlo.add %arg7, %384 : tensor<4x12xf32>
    %401 = stablehlo.add %arg8, %386 : tensor<12xf32>
    %402 = stablehlo.add %arg9, %388 : tensor<4x12xf32>
    %403 = stablehlo.add %arg10, %390 : tensor<12xf32>
    %404 = stablehlo.add %arg11, %392 : tensor<4x12xf32>
    %405 = call @argmax(%34) : (tensor<3x4xf32>) -> tensor<3xi32>
    %406 = stablehlo.compare EQ, %405, %arg38, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %407 = stablehlo.convert %406 : (tensor<3xi1>) -> tensor<3xi32>
    %408 = stablehlo.convert %407 : (tensor<3xi32>) -> tensor<3xf32>
    %cst_135 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %409 = stablehlo.reduce(%408 init: %cst_135) applies stablehlo.add across dimensions = [0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
    %cst_136 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %410 = stablehlo.divide %409, %cst_136 : tensor<f32>
    return %393, %394, %395, %396, %397, %398, %399, %400, %401, %402, %403, %404, %240, %110, %115, %120, %125, %130, %135, %140, %145, %150, %155, %160, %165, %171, %177, %183, %189, %195, %201, %207, %213, %219, %225, %231, %237, %73, %410 : tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<i32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<4xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<4x12xf32>, tensor<f32>, tensor<f32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<5x3x4xf32>, %arg1: tensor<i32>) -> tensor<3x4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 3, 4] : (tensor<5x3x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x3x4xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
    return %1 : tensor<3x4xf32>
  }
  func.func private @closed_call(%arg0: tensor<4x12xf32>, %arg1: tensor<1x12xf32>, %arg2: tensor<12x12xf32>, %arg3: tensor<4x12xf32>, %arg4: tensor<1x12xf32>, %arg5: tensor<4x12xf32>, %arg6: tensor<1x12xf32>, %arg7: tensor<12x12xf32>, %arg8: tensor<12x12xf32>, %arg9: tensor<1x12xf32>, %arg10: tensor<3x12xf32>, %arg11: tensor<3x4xf32>) -> (tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>) {
    %0 = stablehlo.dot_general %arg11, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x12xf32>) -> tensor<3x12xf32>
    %1 = stablehlo.broadcast_in_dim %arg6, dims = [0, 1] : (tensor<1x12xf32>) -> tensor<3x12xf32>
    %2 = stablehlo.add %0, %1 : tensor<3x12xf32>
    %3 = stablehlo.dot_general %arg10, %arg7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %4 = stablehlo.add %2, %3 : tensor<3x12xf32>
    %5 = stablehlo.negate %4 : tensor<3x12xf32>
    %6 = stablehlo.exponential %5 : tensor<3x12xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %8 = stablehlo.add %7, %6 : tensor<3x12xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %10 = stablehlo.divide %9, %8 : tensor<3x12xf32>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %12 = stablehlo.subtract %11, %10 : tensor<3x12xf32>
    %13 = stablehlo.multiply %10, %12 : tensor<3x12xf32>
    %14 = stablehlo.dot_general %arg11, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x12xf32>) -> tensor<3x12xf32>
    %15 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<1x12xf32>) -> tensor<3x12xf32>
    %16 = stablehlo.add %14, %15 : tensor<3x12xf32>
    %17 = stablehlo.dot_general %arg10, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %18 = stablehlo.add %16, %17 : tensor<3x12xf32>
    %19 = stablehlo.negate %18 : tensor<3x12xf32>
    %20 = stablehlo.exponential %19 : tensor<3x12xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %22 = stablehlo.add %21, %20 : tensor<3x12xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %24 = stablehlo.divide %23, %22 : tensor<3x12xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %26 = stablehlo.subtract %25, %24 : tensor<3x12xf32>
    %27 = stablehlo.multiply %24, %26 : tensor<3x12xf32>
    %28 = stablehlo.dot_general %arg11, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x12xf32>) -> tensor<3x12xf32>
    %29 = stablehlo.broadcast_in_dim %arg4, dims = [0, 1] : (tensor<1x12xf32>) -> tensor<3x12xf32>
    %30 = stablehlo.add %28, %29 : tensor<3x12xf32>
    %31 = stablehlo.dot_general %arg10, %arg8, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %32 = stablehlo.broadcast_in_dim %arg9, dims = [0, 1] : (tensor<1x12xf32>) -> tensor<3x12xf32>
    %33 = stablehlo.add %31, %32 : tensor<3x12xf32>
    %34 = stablehlo.multiply %10, %33 : tensor<3x12xf32>
    %35 = stablehlo.add %30, %34 : tensor<3x12xf32>
    %36 = stablehlo.tanh %35 : tensor<3x12xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %37 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %38 = stablehlo.subtract %37, %36 : tensor<3x12xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %39 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<3x12xf32>
    %40 = stablehlo.subtract %39, %24 : tensor<3x12xf32>
    %41 = stablehlo.multiply %40, %36 : tensor<3x12xf32>
    %42 = stablehlo.multiply %24, %arg10 : tensor<3x12xf32>
    %43 = stablehlo.add %41, %42 : tensor<3x12xf32>
    return %43, %43, %arg10, %13, %27, %33, %10, %36, %38, %40, %24 : tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<3x12xf32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<5x3x12xf32>, %arg1: tensor<3x12xf32>, %arg2: tensor<i32>) -> tensor<5x3x12xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<3x12xf32>) -> tensor<1x3x12xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<5x3x12xf32>, tensor<1x3x12xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<5x3x12xf32>
    return %1 : tensor<5x3x12xf32>
  }
  func.func private @take_along_axis(%arg0: tensor<3x4xf32>, %arg1: tensor<3x1xi32>) -> (tensor<3x1xf32>, tensor<3x1x1xi32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3x1xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x1xi1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3x1xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<3x1xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<3x1xi1>, tensor<3x1xi32>
    %5 = stablehlo.reshape %4 : (tensor<3x1xi32>) -> tensor<3x1x1xi32>
    %c_1 = stablehlo.constant dense<3> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<3x1x1xi32>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<3x1x1xi32>, tensor<3x1x1xi32>) -> tensor<3x1x1xi1>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [2] : (tensor<1xi32>) -> tensor<1x1x1xi32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2] : (tensor<1x1x1xi32>) -> tensor<3x1x1xi32>
    %10 = stablehlo.compare LE, %5, %9, SIGNED : (tensor<3x1x1xi32>, tensor<3x1x1xi32>) -> tensor<3x1x1xi1>
    %11 = stablehlo.and %7, %10 : tensor<3x1x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %12 = stablehlo.reduce(%11 init: %c_3) applies stablehlo.and across dimensions = [2] : (tensor<3x1x1xi1>, tensor<i1>) -> tensor<3x1xi1>
    %13 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<3x4xf32>, tensor<3x1x1xi32>) -> tensor<3x1xf32>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x1xf32>
    %15 = stablehlo.select %12, %13, %14 : tensor<3x1xi1>, tensor<3x1xf32>
    return %15, %5 : tensor<3x1xf32>, tensor<3x1x1xi32>
  }
  func.func private @_take(%arg0: tensor<3x1xf32>, %arg1: tensor<i32>) -> (tensor<3xf32>, tensor<1xi32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = call @_where(%0, %1, %arg1) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<1xi32>
    %4 = stablehlo.convert %3 : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %6 = stablehlo.compare GE, %4, %5, SIGNED : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi1>
    %7 = stablehlo.compare LE, %4, %c_1, SIGNED : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi1>
    %8 = stablehlo.and %6, %7 : tensor<1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %9 = stablehlo.reduce(%8 init: %c_3) applies stablehlo.and across dimensions = [0] : (tensor<1xi1>, tensor<i1>) -> tensor<i1>
    %10 = "stablehlo.gather"(%arg0, %4) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1]>, indices_are_sorted = false, slice_sizes = array<i64: 3, 1>}> : (tensor<3x1xf32>, tensor<1xi32>) -> tensor<3xf32>
    %11 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<i1>) -> tensor<3xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %13 = stablehlo.select %11, %10, %12 : tensor<3xi1>, tensor<3xf32>
    return %13, %3 : tensor<3xf32>, tensor<1xi32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @_take_0(%arg0: tensor<1xi32>, %arg1: tensor<3xf32>) -> tensor<3x1xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x1xf32>
    %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %2 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<3x1xf32>, tensor<1xi32>, tensor<3xf32>) -> tensor<3x1xf32>
    return %1 : tensor<3x1xf32>
  }
  func.func private @take_along_axis_1(%arg0: tensor<3x1x1xi32>, %arg1: tensor<3x1xf32>) -> tensor<3x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
    %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 2>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %2 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<3x4xf32>, tensor<3x1x1xi32>, tensor<3x1xf32>) -> tensor<3x4xf32>
    return %1 : tensor<3x4xf32>
  }
  func.func private @dynamic_index_in_dim_2(%arg0: tensor<5x3x12xf32>, %arg1: tensor<i32>) -> tensor<3x12xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 3, 12] : (tensor<5x3x12xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x3x12xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x3x12xf32>) -> tensor<3x12xf32>
    return %1 : tensor<3x12xf32>
  }
  func.func private @closed_call_3(%arg0: tensor<12x12xf32>, %arg1: tensor<12x12xf32>, %arg2: tensor<12x12xf32>, %arg3: tensor<4x12xf32>, %arg4: tensor<12xf32>, %arg5: tensor<12x12xf32>, %arg6: tensor<4x12xf32>, %arg7: tensor<12xf32>, %arg8: tensor<12x12xf32>, %arg9: tensor<4x12xf32>, %arg10: tensor<12xf32>, %arg11: tensor<12x12xf32>, %arg12: tensor<12xf32>, %arg13: tensor<3x12xf32>, %arg14: tensor<3x4xf32>, %arg15: tensor<3x12xf32>, %arg16: tensor<3x12xf32>, %arg17: tensor<3x12xf32>, %arg18: tensor<3x12xf32>, %arg19: tensor<3x12xf32>, %arg20: tensor<3x12xf32>, %arg21: tensor<3x12xf32>, %arg22: tensor<3x12xf32>, %arg23: tensor<3x12xf32>) -> (tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>) {
    %0 = stablehlo.multiply %arg23, %arg13 : tensor<3x12xf32>
    %1 = stablehlo.multiply %arg13, %arg15 : tensor<3x12xf32>
    %2 = stablehlo.multiply %arg22, %arg13 : tensor<3x12xf32>
    %3 = stablehlo.multiply %arg13, %arg20 : tensor<3x12xf32>
    %4 = stablehlo.negate %3 : tensor<3x12xf32>
    %5 = stablehlo.add %1, %4 : tensor<3x12xf32>
    %6 = stablehlo.multiply %2, %arg21 : tensor<3x12xf32>
    %7 = stablehlo.multiply %6, %arg20 : tensor<3x12xf32>
    %8 = stablehlo.add %6, %7 : tensor<3x12xf32>
    %9 = stablehlo.multiply %arg19, %8 : tensor<3x12xf32>
    %10 = stablehlo.multiply %8, %arg18 : tensor<3x12xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%9 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<3x12xf32>, tensor<f32>) -> tensor<12xf32>
    %12 = stablehlo.reshape %11 : (tensor<12xf32>) -> tensor<1x12xf32>
    %13 = stablehlo.reshape %12 : (tensor<1x12xf32>) -> tensor<12xf32>
    %14 = stablehlo.add %arg12, %13 : tensor<12xf32>
    %15 = stablehlo.dot_general %9, %arg15, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x12xf32>) -> tensor<12x12xf32>
    %16 = stablehlo.transpose %15, dims = [1, 0] : (tensor<12x12xf32>) -> tensor<12x12xf32>
    %17 = stablehlo.add %arg11, %16 : tensor<12x12xf32>
    %18 = stablehlo.dot_general %9, %arg2, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %19 = stablehlo.add %0, %18 : tensor<3x12xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %20 = stablehlo.reduce(%8 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<3x12xf32>, tensor<f32>) -> tensor<12xf32>
    %21 = stablehlo.reshape %20 : (tensor<12xf32>) -> tensor<1x12xf32>
    %22 = stablehlo.reshape %21 : (tensor<1x12xf32>) -> tensor<12xf32>
    %23 = stablehlo.add %arg10, %22 : tensor<12xf32>
    %24 = stablehlo.dot_general %8, %arg14, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x4xf32>) -> tensor<12x4xf32>
    %25 = stablehlo.transpose %24, dims = [1, 0] : (tensor<12x4xf32>) -> tensor<4x12xf32>
    %26 = stablehlo.add %arg9, %25 : tensor<4x12xf32>
    %27 = stablehlo.multiply %5, %arg17 : tensor<3x12xf32>
    %28 = stablehlo.dot_general %27, %arg15, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x12xf32>) -> tensor<12x12xf32>
    %29 = stablehlo.transpose %28, dims = [1, 0] : (tensor<12x12xf32>) -> tensor<12x12xf32>
    %30 = stablehlo.add %arg8, %29 : tensor<12x12xf32>
    %31 = stablehlo.dot_general %27, %arg1, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %32 = stablehlo.add %19, %31 : tensor<3x12xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %33 = stablehlo.reduce(%27 init: %cst_1) applies stablehlo.add across dimensions = [0] : (tensor<3x12xf32>, tensor<f32>) -> tensor<12xf32>
    %34 = stablehlo.reshape %33 : (tensor<12xf32>) -> tensor<1x12xf32>
    %35 = stablehlo.reshape %34 : (tensor<1x12xf32>) -> tensor<12xf32>
    %36 = stablehlo.add %arg7, %35 : tensor<12xf32>
    %37 = stablehlo.dot_general %27, %arg14, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x4xf32>) -> tensor<12x4xf32>
    %38 = stablehlo.transpose %37, dims = [1, 0] : (tensor<12x4xf32>) -> tensor<4x12xf32>
    %39 = stablehlo.add %arg6, %38 : tensor<4x12xf32>
    %40 = stablehlo.multiply %10, %arg16 : tensor<3x12xf32>
    %41 = stablehlo.dot_general %40, %arg15, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x12xf32>) -> tensor<12x12xf32>
    %42 = stablehlo.transpose %41, dims = [1, 0] : (tensor<12x12xf32>) -> tensor<12x12xf32>
    %43 = stablehlo.add %arg5, %42 : tensor<12x12xf32>
    %44 = stablehlo.dot_general %40, %arg0, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<12x12xf32>) -> tensor<3x12xf32>
    %45 = stablehlo.add %32, %44 : tensor<3x12xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %46 = stablehlo.reduce(%40 init: %cst_2) applies stablehlo.add across dimensions = [0] : (tensor<3x12xf32>, tensor<f32>) -> tensor<12xf32>
    %47 = stablehlo.reshape %46 : (tensor<12xf32>) -> tensor<1x12xf32>
    %48 = stablehlo.reshape %47 : (tensor<1x12xf32>) -> tensor<12xf32>
    %49 = stablehlo.add %arg4, %48 : tensor<12xf32>
    %50 = stablehlo.dot_general %40, %arg14, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x12xf32>, tensor<3x4xf32>) -> tensor<12x4xf32>
    %51 = stablehlo.transpose %50, dims = [1, 0] : (tensor<12x4xf32>) -> tensor<4x12xf32>
    %52 = stablehlo.add %arg3, %51 : tensor<4x12xf32>
    return %52, %49, %43, %39, %36, %30, %26, %23, %17, %14, %45 : tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<12x12xf32>, tensor<12xf32>, tensor<3x12xf32>
  }
  func.func private @_where_4(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @argmax(%arg0: tensor<3x4xf32>) -> tensor<3xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<3x4xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<3x4xf32>, tensor<3x4xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#1 : tensor<3xi32>
  }
}
