func.func @f(%t: tensor<?xf32>) {
  %r = m3idx.reduce_max %t : tensor<?xf32> -> f32
  %s = m3idx.fold_max %t, 0 : tensor<?xf32> -> tensor<?xf32>
  return
}
