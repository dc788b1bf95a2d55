// sm_90's layout pass (lowering/nvvm/Sm90Layouts.cpp) on small tile kernels: which tiles it puts
// in mma.sync / wgmma fragment orders, which stay blocked, and where it converts.
// RUN: m3idx-opt %s --m3idx-assign-sm90-layouts --split-input-file | FileCheck %s

// A decode's bytes, scales and keys in mma.sync's A rows; the dot's results in its accumulators
// up to the group reduction; the queries (B) and everything else blocked.
// CHECK-LABEL: func.func @mma_sync
// CHECK: m3idx.load_tile {{.*}} -> tensor<1024xi8, #m3idx.layout<mma_rows>>
// CHECK: m3idx.load_tile {{.*}} -> tensor<128xi8, #m3idx.layout<mma_rows>>
// CHECK: m3idx.decode_nvfp4 {{.*}} -> tensor<2048xf8E4M3FN, #m3idx.layout<mma_rows>>
// CHECK: arith.bitcast {{.*}} to tensor<512xf8E4M3FN, #m3idx.layout<blocked>>
// CHECK: m3idx.dot_tiles {{.*}} -> tensor<64xf32, #m3idx.layout<mma_acc>>
// CHECK: tensor.splat {{.*}} : tensor<64xf32, #m3idx.layout<mma_acc>>
// CHECK: arith.maxnumf {{.*}} : tensor<64xf32, #m3idx.layout<mma_acc>>
// CHECK: m3idx.reduce_max_groups {{.*}} : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<4xf32, #m3idx.layout<blocked>>
// CHECK-NOT: convert_layout
func.func @mma_sync(%kv: memref<?xi8>, %out: memref<?xf32>, %floor: f32) {
  %c0 = arith.constant 0 : i64
  %c1024 = arith.constant 1024 : i64
  %c2048 = arith.constant 2048 : i64
  %packed = m3idx.load_tile %kv[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<1024xi8>
  %scales = m3idx.load_tile %kv[%c1024] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<1024xi8>, tensor<128xi8> -> tensor<2048xf8E4M3FN>
  %qb = m3idx.load_tile %kv[%c2048] : memref<?xi8> -> tensor<512xi8>
  %q = arith.bitcast %qb : tensor<512xi8> to tensor<512xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<2048xf8E4M3FN>, tensor<512xf8E4M3FN> -> tensor<64xf32>
  %lo = tensor.splat %floor : tensor<64xf32>
  %kept = arith.maxnumf %dots, %lo : tensor<64xf32>
  %best = m3idx.reduce_max_groups %kept, 4 : tensor<64xf32> -> tensor<4xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<4xf32>, memref<?xf32>
  return
}

// -----

// The dot's results are also stored (a blocked-only use): the keys stay mma.sync rows, the dot
// makes accumulators and one convert_layout gives both uses the blocked tile.
// CHECK-LABEL: func.func @result_read_blocked
// CHECK: %[[DOTS:.*]] = m3idx.dot_tiles {{.*}} : tensor<2048xf8E4M3FN, #m3idx.layout<mma_rows>>, {{.*}} -> tensor<64xf32, #m3idx.layout<mma_acc>>
// CHECK-NEXT: %[[BLOCKED:.*]] = m3idx.convert_layout %[[DOTS]] : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<64xf32, #m3idx.layout<blocked>>
// CHECK-NEXT: m3idx.store_tile %[[BLOCKED]]
// CHECK-NEXT: m3idx.reduce_max_groups %[[BLOCKED]], 4 : tensor<64xf32, #m3idx.layout<blocked>>
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

// -----

// The keys are also read as bytes: their whole chain stays blocked, the dot runs on FFMA and
// nothing is in fragment order.
// CHECK-LABEL: func.func @keys_read_blocked
// CHECK-NOT: mma_
// CHECK: return
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

// -----

// A warpgroup program (4 warps): 64 key tokens as wgmma's A (16 rows a warp), the results in
// wgmma's accumulators, folded over token pairs in-thread, carried by the loop, then reduced.
// CHECK-LABEL: func.func @wgmma
// CHECK: scf.for {{.*}} iter_args({{.*}} = {{.*}}) -> (tensor<256xf32, #m3idx.layout<wgmma_acc_folded>>)
// CHECK: m3idx.decode_nvfp4 {{.*}} -> tensor<8192xf8E4M3FN, #m3idx.layout<mma_rows>>
// CHECK: m3idx.dot_tiles {{.*}} -> tensor<512xf32, #m3idx.layout<wgmma_acc>>
// CHECK: m3idx.fold_max {{.*}}, 8 : tensor<512xf32, #m3idx.layout<wgmma_acc>> -> tensor<256xf32, #m3idx.layout<wgmma_acc_folded>>
// CHECK: m3idx.reduce_max_groups {{.*}}, 8 : tensor<256xf32, #m3idx.layout<wgmma_acc_folded>> -> tensor<8xf32, #m3idx.layout<blocked>>
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

// -----

// Keys read as bytes from a key image (score_prefill's keyImage form): the bytes and their bitcast
// to e4m3 join the keys' group, so they load straight into wgmma's A rows, with no decode.
// CHECK-LABEL: func.func @wgmma_image
// CHECK: m3idx.load_tile {{.*}} -> tensor<8192xi8, #m3idx.layout<mma_rows>>
// CHECK: arith.bitcast {{.*}} : tensor<8192xi8, #m3idx.layout<mma_rows>> to tensor<8192xf8E4M3FN, #m3idx.layout<mma_rows>>
// CHECK: m3idx.dot_tiles {{.*}} -> tensor<512xf32, #m3idx.layout<wgmma_acc>>
// CHECK-NOT: convert_layout
func.func @wgmma_image(%image: memref<?xi8>, %out: memref<?xf32>) attributes {m3idx.warps = 4 : i64} {
  %c0 = arith.constant 0 : i64
  %c8192 = arith.constant 8192 : i64
  %qb = m3idx.load_tile %image[%c8192] : memref<?xi8> -> tensor<1024xi8>
  %q = arith.bitcast %qb : tensor<1024xi8> to tensor<1024xf8E4M3FN>
  %bytes = m3idx.load_tile %image[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<8192xi8>
  %keys = arith.bitcast %bytes : tensor<8192xi8> to tensor<8192xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<8192xf8E4M3FN>, tensor<1024xf8E4M3FN> -> tensor<512xf32>
  %folded = m3idx.fold_max %dots, 8 : tensor<512xf32> -> tensor<256xf32>
  %best = m3idx.reduce_max_groups %folded, 8 : tensor<256xf32> -> tensor<8xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<8xf32>, memref<?xf32>
  return
}
