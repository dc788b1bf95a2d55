// The dot's results are also stored (a blocked-only use): the keys stay mma.sync rows, the dot
// makes accumulators and one convert_layout gives both uses the blocked tile.
func.func @result_read_blocked(%kv: memref<?xi8>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %c1024 = arith.constant 1024 : i64
  %c2048 = arith.constant 2048 : i64
  %packed = m3idx.load_tile %kv[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<1024xi8>
  %scales = m3idx.load_tile %kv[%c1024] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<1024xi8>, tensor<128xi8> -> tensor<2048xf8E4M3FN>
  %qb = m3idx.load_tile %kv[%c2048] : memref<?xi8> -> tensor<512xi8>
  %q = arith.bitcast %qb : tensor<512xi8> to tensor<512xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<2048xf8E4M3FN>, tensor<512xf8E4M3FN> -> tensor<64xf32>
  m3idx.store_tile %dots, %out[%c0] : tensor<64xf32>, memref<?xf32>
  %best = m3idx.reduce_max_groups %dots, 4 : tensor<64xf32> -> tensor<4xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<4xf32>, memref<?xf32>
  return
}
