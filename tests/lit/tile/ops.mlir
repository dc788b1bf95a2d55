// RUN: m3idx-opt %s | m3idx-opt | FileCheck %s
// Each op of the m3idx tile dialect in its canonical text, printed back as parsed (twice).

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%buf: memref<?xi8> {m3idx.access = "read"}, %out: memref<?xf32> {m3idx.access = "write"},
                   %cnt: memref<?xi32> {m3idx.access = "read_write"}, %off: i64) {
  // CHECK: m3idx.program_id
  %pid = m3idx.program_id
  // CHECK: m3idx.iota : tensor<16xi64>
  %iota = m3idx.iota : tensor<16xi64>
  // CHECK: m3idx.load_tile %{{.*}}[%{{.*}}] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
  %packed = m3idx.load_tile %buf[%off] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
  // CHECK: m3idx.load_tile_masked %{{.*}}[%{{.*}}], %{{.*}} : memref<?xi8> -> tensor<16xi8>
  %scales = m3idx.load_tile_masked %buf[%off], %off : memref<?xi8> -> tensor<16xi8>
  // CHECK: m3idx.decode_nvfp4 %{{.*}}, %{{.*}} : tensor<128xi8>, tensor<16xi8> -> tensor<256xf8E4M3FN>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<128xi8>, tensor<16xi8> -> tensor<256xf8E4M3FN>
  // CHECK: m3idx.dot_tiles %{{.*}}, %{{.*}}, 128 : tensor<256xf8E4M3FN>, tensor<256xf8E4M3FN> -> tensor<4xf32>
  %dots = m3idx.dot_tiles %keys, %keys, 128 : tensor<256xf8E4M3FN>, tensor<256xf8E4M3FN> -> tensor<4xf32>
  // CHECK: m3idx.fold_max %{{.*}}, 2 : tensor<4xf32> -> tensor<2xf32>
  %folded = m3idx.fold_max %dots, 2 : tensor<4xf32> -> tensor<2xf32>
  // CHECK: m3idx.reduce_max_groups %{{.*}}, 2 : tensor<4xf32> -> tensor<2xf32>
  %groups = m3idx.reduce_max_groups %dots, 2 : tensor<4xf32> -> tensor<2xf32>
  // CHECK: m3idx.shuffle %{{.*}}, %{{.*}} {{\[}}3, 0] : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %sh = m3idx.shuffle %folded, %groups [3, 0] : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  // CHECK: m3idx.clampf %{{.*}}, 4.480000e+02 : tensor<2xf32>
  %cl = m3idx.clampf %sh, 448.0 : tensor<2xf32>
  // CHECK: m3idx.reduce_max %{{.*}} : tensor<2xf32> -> f32
  %mx = m3idx.reduce_max %cl : tensor<2xf32> -> f32
  // CHECK: m3idx.reduce_add %{{.*}} : tensor<2xf32> -> f32
  %sum = m3idx.reduce_add %cl : tensor<2xf32> -> f32
  // CHECK: m3idx.dot %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>
  %d = m3idx.dot %cl, %cl : tensor<2xf32>, tensor<2xf32>
  // CHECK: m3idx.extract %{{.*}}[1] : tensor<2xf32> -> f32
  %e = m3idx.extract %cl[1] : tensor<2xf32> -> f32
  // CHECK: m3idx.extract_at %{{.*}}[%{{.*}}] : tensor<16xi64> -> i64
  %ea = m3idx.extract_at %iota[%off] : tensor<16xi64> -> i64
  // CHECK: m3idx.pack_score_key %{{.*}}, %{{.*}} : f32, i64 -> i64
  %key = m3idx.pack_score_key %mx, %ea : f32, i64 -> i64
  // CHECK: m3idx.load %{{.*}}[%{{.*}}] : memref<?xi32> -> i32
  %c = m3idx.load %cnt[%off] : memref<?xi32> -> i32
  // CHECK: m3idx.atomic_add %{{.*}}[%{{.*}}], %{{.*}} : memref<?xi32>, i32
  %old = m3idx.atomic_add %cnt[%off], %c : memref<?xi32>, i32
  // CHECK: m3idx.store %{{.*}}, %{{.*}}[%{{.*}}] : f32, memref<?xf32>
  m3idx.store %d, %out[%off] : f32, memref<?xf32>
  // CHECK: m3idx.grid_release
  m3idx.grid_release
  // CHECK: m3idx.grid_await
  m3idx.grid_await
  // CHECK: m3idx.program_sync
  m3idx.program_sync
  // CHECK: m3idx.store_tile %{{.*}}, %{{.*}}[%{{.*}}] : tensor<2xf32>, memref<?xf32>
  m3idx.store_tile %cl, %out[%off] : tensor<2xf32>, memref<?xf32>
  %offs = tensor.splat %off : tensor<2xi64>
  %mask = arith.cmpf oeq, %cl, %cl : tensor<2xf32>
  // CHECK: m3idx.store_scatter %{{.*}}, %{{.*}}[%{{.*}}], %{{.*}} : tensor<2xf32>, memref<?xf32>, tensor<2xi64>, tensor<2xi1>
  m3idx.store_scatter %cl, %out[%offs], %mask : tensor<2xf32>, memref<?xf32>, tensor<2xi64>, tensor<2xi1>
  // CHECK: m3idx.load_gather %{{.*}}[%{{.*}}], %{{.*}} : memref<?xf32>, tensor<2xi64>, tensor<2xi1> -> tensor<2xf32>
  %g = m3idx.load_gather %out[%offs], %mask : memref<?xf32>, tensor<2xi64>, tensor<2xi1> -> tensor<2xf32>
  // CHECK: m3idx.load_rows %{{.*}}[%{{.*}}], %{{.*}} {align = 16 : i32} : memref<?xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<8xf32>
  %r = m3idx.load_rows %out[%offs], %offs {align = 16 : i32} : memref<?xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<8xf32>
  return
}

// Layouts are tensor encodings (assigned by a target's layout pass); convert_layout moves a tile
// between two.
// CHECK-LABEL: func.func @layouts
// CHECK: m3idx.convert_layout %{{.*}} : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<64xf32, #m3idx.layout<blocked>>
func.func @layouts(%t: tensor<64xf32, #m3idx.layout<mma_acc>>) -> tensor<64xf32, #m3idx.layout<blocked>> {
  %c = m3idx.convert_layout %t : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<64xf32, #m3idx.layout<blocked>>
  return %c : tensor<64xf32, #m3idx.layout<blocked>>
}

// -----

// A staged loop's hand-over: the producer's values as the consumer reads them, in an scf.for.
// CHECK-LABEL: func.func @stage
// CHECK: %[[S:.*]]:2 = m3idx.stage %{{.*}}, %{{.*}} {stages = 3 : i64} : tensor<64xi8>, i64 -> tensor<64xi8>, i64
func.func @stage(%buf: memref<?xi8>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4 = arith.constant 4 : i64
  scf.for %i = %c0 to %c4 step %c1 : i64 {
    %t = m3idx.load_tile %buf[%i] : memref<?xi8> -> tensor<64xi8>
    %s:2 = m3idx.stage %t, %i {stages = 3 : i64} : tensor<64xi8>, i64 -> tensor<64xi8>, i64
    m3idx.store_tile %s#0, %buf[%s#1] : tensor<64xi8>, memref<?xi8>
  }
  return
}
