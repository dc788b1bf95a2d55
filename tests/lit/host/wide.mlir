// The host form of ops on tiles of more than 64 lanes (lowering/host/HostOpPatterns.cpp): each
// tile a stack buffer made once in the entry block, each op a rolled loop over 64-lane pieces
// (and a tail), splats and iota made where they are used.
// RUN: m3idx-opt %s --m3idx-to-host --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[BUF:.*]]: memref<?xi32>, %[[OUT:.*]]: memref<?xi32>, %[[X:[^:]*]]: i32,
// CHECK: %[[SUM:.*]] = memref.alloca() {alignment = 64 : i64} : memref<200xi32>
// CHECK: %[[SPLAT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<200xi32>
// CHECK: %[[T:.*]] = memref.alloca() {alignment = 64 : i64} : memref<200xi32>
// The load: 3 pieces of 64 in a rolled loop, then the 8-lane tail.
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step
// CHECK: vector.load %[[BUF]][%{{.*}}] : memref<?xi32>, vector<64xi32>
// CHECK: vector.store %{{.*}}, %[[T]][%{{.*}}] : memref<200xi32>, vector<64xi32>
// CHECK: } {llvm.loop_annotation = #loop_annotation}
// CHECK: vector.load %[[BUF]][%{{.*}}] : memref<?xi32>, vector<8xi32>
// The add: the splat's pieces made in place, not loaded.
// CHECK: scf.for
// CHECK: %[[A:.*]] = vector.load %[[T]][%{{.*}}] : memref<200xi32>, vector<64xi32>
// CHECK-NEXT: %[[B:.*]] = vector.broadcast %[[X]] : i32 to vector<64xi32>
// CHECK-NEXT: %[[S:.*]] = arith.addi %[[A]], %[[B]] : vector<64xi32>
// CHECK-NEXT: vector.store %[[S]], %[[SUM]]
// CHECK: arith.addi %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: vector.load %[[SUM]][%{{.*}}] : memref<200xi32>, vector<64xi32>
// CHECK: vector.store %{{.*}}, %[[OUT]]
// CHECK-NOT: vector<200x
func.func @elementwise(%buf: memref<?xi32>, %out: memref<?xi32>, %x: i32) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xi32> -> tensor<200xi32>
  %s = tensor.splat %x : tensor<200xi32>
  %sum = arith.addi %t, %s : tensor<200xi32>
  m3idx.store_tile %sum, %out[%c0] : tensor<200xi32>, memref<?xi32>
  return
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK: %[[FOLD:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[GROUPS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK: %[[T:.*]] = memref.alloca() {alignment = 64 : i64} : memref<256xf32>
// reduce_max: pieces folded into the first, then one reduction.
// CHECK: %[[FIRST:.*]] = vector.load %[[T]][%{{.*}}] : memref<256xf32>, vector<64xf32>
// CHECK: %[[ACC:.*]] = scf.for %{{.*}} iter_args(%[[I:.*]] = %[[FIRST]]) -> (vector<64xf32>)
// CHECK: arith.maxnumf %[[I]], %{{.*}} : vector<64xf32>
// CHECK: vector.reduction <maxnumf>, %[[ACC]] : vector<64xf32> into f32
// reduce_max_groups: a loop over the 8 groups of 32.
// CHECK: vector.load %[[T]][%{{.*}}] : memref<256xf32>, vector<32xf32>
// CHECK: memref.store %{{.*}}, %[[GROUPS]]
// fold_max with pairs 64 apart (2 x 64 spans no piece): one lane a trip.
// CHECK: arith.divui
// CHECK: %[[LO:.*]] = memref.load %[[T]]
// CHECK: %[[HI:.*]] = memref.load %[[T]]
// CHECK: %[[M:.*]] = arith.maxnumf %[[LO]], %[[HI]] : f32
// CHECK: memref.store %[[M]], %[[FOLD]]
// extract of a wide tile: a load from its buffer.
// CHECK: memref.load %[[FOLD]][%{{.*}}] : memref<128xf32>
func.func @reductions(%buf: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<256xf32>
  %max = m3idx.reduce_max %t : tensor<256xf32> -> f32
  %g = m3idx.reduce_max_groups %t, 8 : tensor<256xf32> -> tensor<8xf32>
  %f = m3idx.fold_max %t, 64 : tensor<256xf32> -> tensor<128xf32>
  %l = m3idx.extract %f[100] : tensor<128xf32> -> f32
  m3idx.store %max, %out[%c0] : f32, memref<?xf32>
  m3idx.store %l, %out[%c0] : f32, memref<?xf32>
  m3idx.store_tile %g, %out[%c0] : tensor<8xf32>, memref<?xf32>
  return
}

// -----

// The permutation's table, a global of the module:
// CHECK: memref.global "private" constant @m3idx_shuffle_0 : memref<4xi32> = dense<[127, 0, 255, 128]>
// CHECK-LABEL: func.func @shuffle
// CHECK-DAG: %[[OUT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4xi8>
// CHECK-DAG: %[[A:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xi8>
// CHECK: %[[TABLE:.*]] = memref.get_global @m3idx_shuffle_0 : memref<4xi32>
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK: memref.load %[[TABLE]][%[[J]]]
// CHECK: scf.if %{{.*}} -> (i8)
// CHECK: memref.load %[[A]]
// CHECK: } else {
// CHECK: arith.subi
// CHECK: memref.load %[[A]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[J]]]
// The 4-lane result is narrow again: a vector.
// CHECK: vector.load %[[OUT]][%{{.*}}] : memref<4xi8>, vector<4xi8>
func.func @shuffle(%buf: memref<?xi8>, %out: memref<?xi8>) {
  %c0 = arith.constant 0 : i64
  %a = m3idx.load_tile %buf[%c0] : memref<?xi8> -> tensor<128xi8>
  %s = m3idx.shuffle %a, %a [127, 0, 255, 128] : tensor<128xi8>, tensor<128xi8> -> tensor<4xi8>
  m3idx.store_tile %s, %out[%c0] : tensor<4xi8>, memref<?xi8>
  return
}

// -----

// CHECK-LABEL: func.func @masked_and_decode
// CHECK-SAME: %[[LIMIT:[^:]*]]: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: %[[KEYS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<256xi8>
// CHECK: %[[SCALES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
// CHECK: %[[PACKED:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xi8>
// A masked piece: lanes [at, min(limit, 128)).
// CHECK: %[[CLAMPED:.*]] = arith.minsi %[[LIMIT]], %{{.*}} : i64
// CHECK: %[[LIM:.*]] = arith.index_cast %[[CLAMPED]] : i64 to index
// CHECK: scf.for
// CHECK: arith.subi %[[LIM]], %{{.*}} : index
// CHECK: vector.create_mask %{{.*}} : vector<64xi1>
// CHECK: vector.maskedload
// CHECK: vector.store %{{.*}}, %[[PACKED]]
// The decode: 64 keys a trip from 32 packed bytes and 4 scales.
// CHECK: scf.for
// CHECK: vector.load %[[PACKED]][%{{.*}}] : memref<128xi8>, vector<32xi8>
// CHECK: vector.load %[[SCALES]][%{{.*}}] : memref<16xi8>, vector<4xi8>
// CHECK: arith.truncf %{{.*}} : vector<64xf32> to vector<64xf8E4M3FN>
// CHECK: vector.store %{{.*}}, %[[KEYS]]
// The bitcast to bytes shares the keys' buffer: the store reads it.
// CHECK: vector.load %[[KEYS]][%{{.*}}] : memref<256xi8>, vector<64xi8>
func.func @masked_and_decode(%kv: memref<?xi8>, %out: memref<?xi8>, %limit: i64) {
  %c0 = arith.constant 0 : i64
  %packed = m3idx.load_tile_masked %kv[%c0], %limit : memref<?xi8> -> tensor<128xi8>
  %scales = m3idx.load_tile %kv[%c0] : memref<?xi8> -> tensor<16xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<128xi8>, tensor<16xi8> -> tensor<256xf8E4M3FN>
  %bytes = arith.bitcast %keys : tensor<256xf8E4M3FN> to tensor<256xi8>
  m3idx.store_tile %bytes, %out[%c0] : tensor<256xi8>, memref<?xi8>
  return
}
