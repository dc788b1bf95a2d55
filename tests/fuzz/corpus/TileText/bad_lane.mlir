func.func @f(%t: tensor<4xf32>) {
  %e = m3idx.extract %t[9] : tensor<4xf32> -> f32
  return
}
