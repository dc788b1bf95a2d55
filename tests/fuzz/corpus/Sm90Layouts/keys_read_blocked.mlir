// The keys are also read as bytes: their whole chain stays blocked, the dot runs on FFMA and
// nothing is in fragment order.
func.func @keys_read_blocked(%kv: memref<?xi8>, %out: memref<?xf32>, %bytes: memref<?xi8>) {
  %c0 = arith.constant 0 : i64
  %c1024 = arith.constant 1024 : i64
  %c2048 = arith.constant 2048 : i64
  %packed = m3idx.load_tile %kv[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<1024xi8>
  %scales = m3idx.load_tile %kv[%c1024] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<1024xi8>, tensor<128xi8> -> tensor<2048xf8E4M3FN>
  %kb = arith.bitcast %keys : tensor<2048xf8E4M3FN> to tensor<2048xi8>
  m3idx.store_tile %kb, %bytes[%c0] : tensor<2048xi8>, memref<?xi8>
  %qb = m3idx.load_tile %kv[%c2048] : memref<?xi8> -> tensor<512xi8>
  %q = arith.bitcast %qb : tensor<512xi8> to tensor<512xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<2048xf8E4M3FN>, tensor<512xf8E4M3FN> -> tensor<64xf32>
  %best = m3idx.reduce_max_groups %dots, 4 : tensor<64xf32> -> tensor<4xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<4xf32>, memref<?xf32>
  return
}
