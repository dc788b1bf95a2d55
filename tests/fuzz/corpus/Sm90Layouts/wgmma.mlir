// A warpgroup program (4 warps): 64 key tokens as wgmma's A (16 rows a warp), the results in
// wgmma's accumulators, folded over token pairs in-thread, carried by the loop, then reduced.
func.func @wgmma(%kv: memref<?xi8>, %out: memref<?xf32>, %n: i64) attributes {m3idx.warps = 4 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4096 = arith.constant 4096 : i64
  %c8192 = arith.constant 8192 : i64
  %ninf = arith.constant 0xFF800000 : f32
  %init = tensor.splat %ninf : tensor<256xf32>
  %qb = m3idx.load_tile %kv[%c8192] : memref<?xi8> -> tensor<1024xi8>
  %q = arith.bitcast %qb : tensor<1024xi8> to tensor<1024xf8E4M3FN>
  %run = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<256xf32>) : i64 {
    %packed = m3idx.load_tile %kv[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<4096xi8>
    %scales = m3idx.load_tile %kv[%c4096] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
    %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<4096xi8>, tensor<512xi8> -> tensor<8192xf8E4M3FN>
    %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<8192xf8E4M3FN>, tensor<1024xf8E4M3FN> -> tensor<512xf32>
    %folded = m3idx.fold_max %dots, 8 : tensor<512xf32> -> tensor<256xf32>
    %next = arith.maxnumf %acc, %folded : tensor<256xf32>
    scf.yield %next : tensor<256xf32>
  }
  %best = m3idx.reduce_max_groups %run, 8 : tensor<256xf32> -> tensor<8xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<8xf32>, memref<?xf32>
  return
}
