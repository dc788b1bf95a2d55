// The host form of each op on tiles of at most 64 lanes (lowering/host/HostOpPatterns.cpp): its
// vector form, one pattern per op.
// RUN: m3idx-opt %s --m3idx-to-host --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[OUT:.*]]: memref<?xi64>, %[[X:.*]]: i64, %[[S:.*]]: f32, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: %[[IOTA:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi64>
// CHECK: %[[SPLAT:.*]] = vector.broadcast %[[X]] : i64 to vector<8xi64>
// CHECK: %[[SUM:.*]] = arith.addi %[[IOTA]], %[[SPLAT]] : vector<8xi64>
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[SUM]], %[[SPLAT]] : vector<8xi64>
// CHECK: %[[PICK:.*]] = arith.select %[[LT]], %[[IOTA]], %[[SUM]] : vector<8xi1>, vector<8xi64>
// CHECK: %[[F:.*]] = vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK-DAG: %[[LO:.*]] = arith.constant dense<-4.480000e+02> : vector<8xf32>
// CHECK-DAG: %[[HI:.*]] = arith.constant dense<4.480000e+02> : vector<8xf32>
// CHECK: %[[MIN:.*]] = arith.minimumf %[[F]], %[[HI]] : vector<8xf32>
// CHECK: %[[C:.*]] = arith.maximumf %[[MIN]], %[[LO]] : vector<8xf32>
// CHECK: arith.cmpf uno, %[[C]], %[[C]] : vector<8xf32>
// CHECK: %[[BLOCK:.*]] = arith.andi %[[PICK]], %{{.*}} : vector<8xi64>
// CHECK: %[[KEY:.*]] = arith.ori %{{.*}}, %[[BLOCK]] : vector<8xi64>
// CHECK: vector.store %[[KEY]], %[[OUT]][%{{.*}}] : memref<?xi64>, vector<8xi64>
// CHECK-NOT: tensor
// CHECK-NOT: m3idx.
func.func @elementwise(%out: memref<?xi64>, %x: i64, %s: f32) {
  %c0 = arith.constant 0 : i64
  %iota = m3idx.iota : tensor<8xi64>
  %splat = tensor.splat %x : tensor<8xi64>
  %sum = arith.addi %iota, %splat : tensor<8xi64>
  %lt = arith.cmpi slt, %sum, %splat : tensor<8xi64>
  %pick = arith.select %lt, %iota, %sum : tensor<8xi1>, tensor<8xi64>
  %f = tensor.splat %s : tensor<8xf32>
  %c = m3idx.clampf %f, 4.480000e+02 : tensor<8xf32>
  %key = m3idx.pack_score_key %c, %pick : tensor<8xf32>, tensor<8xi64> -> tensor<8xi64>
  m3idx.store_tile %key, %out[%c0] : tensor<8xi64>, memref<?xi64>
  return
}

// -----

// CHECK-LABEL: func.func @lanes
// CHECK-SAME: (%[[BUF:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>, %[[I:[^:]*]]: i64,
// CHECK: %[[T:.*]] = vector.load %[[BUF]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: %[[LIM:.*]] = arith.minsi %[[I]], %{{.*}} : i64
// CHECK: %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK: %[[U:.*]] = vector.maskedload %[[BUF]][%{{.*}}], %[[MASK]], %{{.*}} : memref<?xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK: %[[A:.*]] = vector.extract %[[T]][3] : f32 from vector<16xf32>
// CHECK: %[[AT:.*]] = arith.index_cast %[[I]] : i64 to index
// CHECK: %[[B:.*]] = vector.extract %[[U]][%[[AT]]] : f32 from vector<16xf32>
// CHECK: %[[SH:.*]] = vector.shuffle %[[T]], %[[U]] [1, 0, 17, 16] : vector<16xf32>, vector<16xf32>
// CHECK: vector.reduction <add>, %[[SH]] fastmath<reassoc> : vector<4xf32> into f32
// CHECK: vector.reduction <maxnumf>, %[[T]] fastmath<reassoc> : vector<16xf32> into f32
// CHECK: %[[PROD:.*]] = arith.mulf %[[T]], %[[U]] : vector<16xf32>
// CHECK: vector.reduction <add>, %[[PROD]] fastmath<reassoc> : vector<16xf32> into f32
// CHECK-COUNT-4: vector.extract_strided_slice %[[T]]
// CHECK: %[[HIGH:.*]] = vector.shuffle %[[U]], %[[U]] [8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: %[[LOW:.*]] = vector.shuffle %[[U]], %[[U]] [0, 1, 2, 3, 4, 5, 6, 7]
// CHECK: arith.maxnumf %[[LOW]], %[[HIGH]] : vector<8xf32>
// CHECK: memref.store %[[A]], %[[OUT]]
// CHECK: memref.store %[[B]], %[[OUT]]
func.func @lanes(%buf: memref<?xf32>, %out: memref<?xf32>, %i: i64) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<16xf32>
  %u = m3idx.load_tile_masked %buf[%c0], %i : memref<?xf32> -> tensor<16xf32>
  %a = m3idx.extract %t[3] : tensor<16xf32> -> f32
  %b = m3idx.extract_at %u[%i] : tensor<16xf32> -> f32
  %s = m3idx.shuffle %t, %u [1, 0, 17, 16] : tensor<16xf32>, tensor<16xf32> -> tensor<4xf32>
  %sum = m3idx.reduce_add %s : tensor<4xf32> -> f32
  %max = m3idx.reduce_max %t : tensor<16xf32> -> f32
  %dot = m3idx.dot %t, %u : tensor<16xf32>, tensor<16xf32>
  %g = m3idx.reduce_max_groups %t, 4 : tensor<16xf32> -> tensor<4xf32>
  %f = m3idx.fold_max %u, 8 : tensor<16xf32> -> tensor<8xf32>
  m3idx.store %a, %out[%c0] : f32, memref<?xf32>
  m3idx.store %b, %out[%c0] : f32, memref<?xf32>
  m3idx.store %sum, %out[%c0] : f32, memref<?xf32>
  m3idx.store %max, %out[%c0] : f32, memref<?xf32>
  m3idx.store %dot, %out[%c0] : f32, memref<?xf32>
  m3idx.store_tile %g, %out[%c0] : tensor<4xf32>, memref<?xf32>
  m3idx.store_tile %f, %out[%c0] : tensor<8xf32>, memref<?xf32>
  return
}

// -----

// CHECK-LABEL: func.func @memory
// CHECK-SAME: (%[[BUF:.*]]: memref<?xi32>, %[[OUT:.*]]: memref<?xi32>,
// CHECK: llvm.fence release
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.atomic_rmw addi %{{.*}}, %[[BUF]][%[[C0]]] : (i32, memref<?xi32>) -> i32
// CHECK-NEXT: llvm.fence acquire
// CHECK: %[[X:.*]] = memref.load %[[BUF]]
// CHECK: %[[V:.*]] = vector.broadcast %[[X]] : i32 to vector<8xi32>
// CHECK: %[[AT:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi64>
// CHECK: %[[CMP:.*]] = arith.cmpi sgt, %[[V]], %[[V]] : vector<8xi32>
// CHECK: vector.scatter %[[OUT]][%{{.*}}] [%[[AT]]], %[[CMP]], %[[V]]
// CHECK: %[[G:.*]] = vector.gather %[[BUF]][%{{.*}}] [%[[AT]]], %[[CMP]], %{{.*}} : memref<?xi32>, vector<8xi64>, vector<8xi1>, vector<8xi32> into vector<8xi32>
// CHECK: vector.store %[[G]], %[[OUT]]
// CHECK-NOT: m3idx.grid
// CHECK-NOT: m3idx.program_sync
func.func @memory(%buf: memref<?xi32>, %out: memref<?xi32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i32
  %old = m3idx.atomic_add %buf[%c0], %c1 : memref<?xi32>, i32
  m3idx.grid_await
  %x = m3idx.load %buf[%c0] : memref<?xi32> -> i32
  %v = tensor.splat %x : tensor<8xi32>
  %at = m3idx.iota : tensor<8xi64>
  %cmp = arith.cmpi sgt, %v, %v : tensor<8xi32>
  m3idx.store_scatter %v, %out[%at], %cmp : tensor<8xi32>, memref<?xi32>, tensor<8xi64>, tensor<8xi1>
  m3idx.program_sync
  %g = m3idx.load_gather %buf[%at], %cmp : memref<?xi32>, tensor<8xi64>, tensor<8xi1> -> tensor<8xi32>
  m3idx.store_tile %g, %out[%c0] : tensor<8xi32>, memref<?xi32>
  m3idx.grid_release
  return
}

// -----

// CHECK-LABEL: func.func @decode_and_dots
// CHECK-DAG: %[[RES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK-DAG: %[[KEYS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32xi8>
// CHECK-DAG: %[[ROWS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
// CHECK: %[[P:.*]] = vector.load %{{.*}} : memref<?xi8>, vector<16xi8>
// CHECK: %[[SC:.*]] = vector.load %{{.*}} : memref<?xi8>, vector<2xi8>
// CHECK: %[[LO:.*]] = arith.andi %[[P]]
// CHECK: %[[HI:.*]] = arith.shrui %[[P]]
// CHECK: vector.shuffle %[[LO]], %[[HI]] [0, 16, 1, 17,
// CHECK: arith.extf %{{.*}} : vector<32xf4E2M1FN> to vector<32xf32>
// CHECK: %[[K:.*]] = arith.truncf %{{.*}} : vector<32xf32> to vector<32xf8E4M3FN>
// The queries (b) widened to f32 rows where they are defined, before the dot:
// CHECK: scf.for
// CHECK: arith.extf %{{.*}} : vector<8xf8E4M3FN> to vector<8xf32>
// CHECK: vector.store %{{.*}}, %[[ROWS]]
// CHECK: arith.bitcast %[[K]] : vector<32xf8E4M3FN> to vector<32xi8>
// CHECK: scf.for %[[M:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step
// CHECK: vector.load %[[ROWS]]
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<8xf32> into f32
// CHECK: memref.store %{{.*}}, %[[RES]]
// CHECK: vector.load %[[RES]][%{{.*}}] : memref<8xf32>, vector<8xf32>
func.func @decode_and_dots(%kv: memref<?xi8>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %c16 = arith.constant 16 : i64
  %packed = m3idx.load_tile %kv[%c0] : memref<?xi8> -> tensor<16xi8>
  %scales = m3idx.load_tile %kv[%c16] : memref<?xi8> -> tensor<2xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<16xi8>, tensor<2xi8> -> tensor<32xf8E4M3FN>
  %qb = m3idx.load_tile %kv[%c16] : memref<?xi8> -> tensor<16xi8>
  %q = arith.bitcast %qb : tensor<16xi8> to tensor<16xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 8 : tensor<32xf8E4M3FN>, tensor<16xf8E4M3FN> -> tensor<8xf32>
  m3idx.store_tile %dots, %out[%c0] : tensor<8xf32>, memref<?xf32>
  return
}

// -----

// A staged loop's hand-over: the host runs the roles trip by trip, so the consumer reads the
// producer's vector itself.
// CHECK-LABEL: func.func @staged
// CHECK: scf.for
// CHECK: %[[T:.*]] = vector.load %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK-NOT: m3idx.stage
// CHECK: arith.maxnumf %{{.*}}, %[[T]] : vector<8xf32>
func.func @staged(%out: memref<?xf32> {m3idx.access = "read_write", m3idx.name = "out"}, %x: f32 {m3idx.name = "x"}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %s = tensor.splat %x : tensor<8xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %s) -> (tensor<8xf32>) : i64 {
    %at = arith.muli %i, %c8 : i64
    %t = m3idx.load_tile %out[%at] : memref<?xf32> -> tensor<8xf32>
    %staged = m3idx.stage %t {stages = 2 : i64} : tensor<8xf32> -> tensor<8xf32>
    %n = arith.maxnumf %acc, %staged : tensor<8xf32>
    scf.yield %n : tensor<8xf32>
  }
  %best = m3idx.reduce_max %r : tensor<8xf32> -> f32
  m3idx.store %best, %out[%c0] : f32, memref<?xf32>
  return
}
