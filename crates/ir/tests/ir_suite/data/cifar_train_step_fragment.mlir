// A hand-written fragment in the style of a cifar train-step render:
// maxpool backward (select_and_scatter), conv input/weight gradients,
// data-parallel all_reduce, and an AdamW tail.
module @cifar8_adam_train_step {
  func.func @cifar8_adam_train_step(%x: tensor<2x3x4x4xf32>, %W1: tensor<2x3x3x3xf32>, %cb1: tensor<2xf32>, %W1m: tensor<2x3x3x3xf32>, %W1v: tensor<2x3x3x3xf32>, %lr: tensor<f32>, %bc1: tensor<f32>, %bc2: tensor<f32>, %onehot: tensor<2x4xf32>) -> (tensor<2x3x3x3xf32>, tensor<2x3x3x3xf32>, tensor<2x3x3x3xf32>, tensor<f32>) {
    %conv = stablehlo.convolution(%x, %W1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<2x3x3x3xf32>) -> tensor<2x2x4x4xf32>
    %bb = stablehlo.broadcast_in_dim %cb1, dims = [1] : (tensor<2xf32>) -> tensor<2x2x4x4xf32>
    %h = stablehlo.add %conv, %bb : tensor<2x2x4x4xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<2x2x4x4xf32>
    %pos = stablehlo.compare  GT, %h, %zeros,  FLOAT : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xi1>
    %r = stablehlo.select %pos, %h, %zeros : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %pool = "stablehlo.reduce_window"(%r, %ninf) <{window_dimensions = array<i64: 1, 1, 2, 2>, window_strides = array<i64: 1, 1, 2, 2>}> ({
    ^bb0(%sa: tensor<f32>, %sb: tensor<f32>):
      %m = stablehlo.maximum %sa, %sb : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x2x2xf32>
    %flat = stablehlo.reshape %pool : (tensor<2x2x2x2xf32>) -> tensor<2x8xf32>
    %logits = stablehlo.slice %flat [0:2, 0:8:2] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    %mx = stablehlo.reduce(%logits init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %mxb = stablehlo.broadcast_in_dim %mx, dims = [0] : (tensor<2xf32>) -> tensor<2x4xf32>
    %sh = stablehlo.subtract %logits, %mxb : tensor<2x4xf32>
    %e = stablehlo.exponential %sh : tensor<2x4xf32>
    %s:2 = stablehlo.reduce(%e init: %zero), (%sh init: %zero) across dimensions = [1] : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
     reducer(%a0: tensor<f32>, %b0: tensor<f32>) (%a1: tensor<f32>, %b1: tensor<f32>)  {
      %s0 = stablehlo.add %a0, %b0 : tensor<f32>
      %s1 = stablehlo.add %a1, %b1 : tensor<f32>
      stablehlo.return %s0, %s1 : tensor<f32>, tensor<f32>
    }
    %ls = stablehlo.log %s#0 : tensor<2xf32>
    %loss0 = stablehlo.reduce(%ls init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
    %dy = stablehlo.pad %r, %zero, low = [0, 0, 0, 0], high = [0, 0, 0, 0], interior = [0, 0, 0, 0] : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
    %g = "stablehlo.select_and_scatter"(%r, %pool, %zero) <{window_dimensions = array<i64: 1, 1, 2, 2>, window_strides = array<i64: 1, 1, 2, 2>}> ({
    ^bb0(%sc: tensor<f32>, %sd: tensor<f32>):
      %ge = stablehlo.compare  GE, %sc, %sd,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %ge : tensor<i1>
    }, {
    ^bb0(%sc: tensor<f32>, %sd: tensor<f32>):
      %ad = stablehlo.add %sc, %sd : tensor<f32>
      stablehlo.return %ad : tensor<f32>
    }) : (tensor<2x2x4x4xf32>, tensor<2x2x2x2xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
    %gm = stablehlo.select %pos, %g, %zeros : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
    %xt = stablehlo.transpose %x, dims = [1, 0, 2, 3] : (tensor<2x3x4x4xf32>) -> tensor<3x2x4x4xf32>
    %gt = stablehlo.transpose %gm, dims = [1, 0, 2, 3] : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %dWt = stablehlo.convolution(%xt, %gt) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<3x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<3x2x3x3xf32>
    %dW0 = stablehlo.transpose %dWt, dims = [1, 0, 2, 3] : (tensor<3x2x3x3xf32>) -> tensor<2x3x3x3xf32>
    %dWr = "stablehlo.all_reduce"(%dW0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %pq = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %pq : tensor<f32>
    }) : (tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
    %two = stablehlo.constant dense<2.000000e+00> : tensor<2x3x3x3xf32>
    %dW = stablehlo.divide %dWr, %two : tensor<2x3x3x3xf32>
    %dWrev = stablehlo.reverse %dW, dims = [2, 3] : tensor<2x3x3x3xf32>
    %b1 = stablehlo.constant dense<0.899999976> : tensor<2x3x3x3xf32>
    %ob1 = stablehlo.constant dense<1.000000e-01> : tensor<2x3x3x3xf32>
    %ob2 = stablehlo.constant dense<1.000000e-03> : tensor<2x3x3x3xf32>
    %b2 = stablehlo.constant dense<9.990000e-01> : tensor<2x3x3x3xf32>
    %mA = stablehlo.multiply %b1, %W1m : tensor<2x3x3x3xf32>
    %mB = stablehlo.multiply %ob1, %dWrev : tensor<2x3x3x3xf32>
    %m1 = stablehlo.add %mA, %mB : tensor<2x3x3x3xf32>
    %g2 = stablehlo.multiply %dWrev, %dWrev : tensor<2x3x3x3xf32>
    %vA = stablehlo.multiply %b2, %W1v : tensor<2x3x3x3xf32>
    %vB = stablehlo.multiply %ob2, %g2 : tensor<2x3x3x3xf32>
    %v1 = stablehlo.add %vA, %vB : tensor<2x3x3x3xf32>
    %bc1b = stablehlo.broadcast_in_dim %bc1, dims = [] : (tensor<f32>) -> tensor<2x3x3x3xf32>
    %bc2b = stablehlo.broadcast_in_dim %bc2, dims = [] : (tensor<f32>) -> tensor<2x3x3x3xf32>
    %mh = stablehlo.divide %m1, %bc1b : tensor<2x3x3x3xf32>
    %vh = stablehlo.divide %v1, %bc2b : tensor<2x3x3x3xf32>
    %sq = stablehlo.sqrt %vh : tensor<2x3x3x3xf32>
    %eps = stablehlo.constant dense<9.99999993E-9> : tensor<2x3x3x3xf32>
    %den = stablehlo.add %sq, %eps : tensor<2x3x3x3xf32>
    %upd = stablehlo.divide %mh, %den : tensor<2x3x3x3xf32>
    %lrb = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<2x3x3x3xf32>
    %step = stablehlo.multiply %lrb, %upd : tensor<2x3x3x3xf32>
    %W1n = stablehlo.subtract %W1, %step : tensor<2x3x3x3xf32>
    %idx = stablehlo.iota dim = 0 : tensor<4xi64>
    %mask = stablehlo.constant dense<[true, false, true, false]> : tensor<4xi1>
    %ints = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
    %fl = stablehlo.convert %ints : (tensor<2x2xi32>) -> tensor<2x2xf32>
    %two0 = stablehlo.constant dense<2.0> : tensor<f32>
    %cl = stablehlo.clamp %zero, %fl, %two0 : (tensor<f32>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
    %cat = stablehlo.concatenate %fl, %cl, dim = 0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
    return %W1n, %m1, %v1, %loss0 : tensor<2x3x3x3xf32>, tensor<2x3x3x3xf32>, tensor<2x3x3x3xf32>, tensor<f32>
  }
}
