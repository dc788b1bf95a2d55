// The host form of a kernel's function, its program id, loops and branches
// (lowering/host/HostRegionPatterns.cpp).
// RUN: m3idx-opt %s --m3idx-to-host --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @program
// The kernel's arguments lose their m3idx attributes and gain the range of program ids.
// CHECK-SAME: (%[[OUT:.*]]: memref<?xi64>, %[[N:.*]]: i64, %[[BEGIN:.*]]: i64, %[[END:[^:]*]]: i64)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NOT: m3idx
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[E:.*]] = arith.index_cast %[[END]] : i64 to index
// CHECK-DAG: %[[B:.*]] = arith.index_cast %[[BEGIN]] : i64 to index
// CHECK: scf.for %[[IV:.*]] = %[[B]] to %[[E]] step %[[ONE]] {
// CHECK-NEXT: %[[PID:.*]] = arith.index_cast %[[IV]] : index to i64
// CHECK-NEXT: %[[AT:.*]] = arith.index_cast %[[PID]] : i64 to index
// CHECK-NEXT: memref.store %[[N]], %[[OUT]][%[[AT]]] : memref<?xi64>
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @program(%out: memref<?xi64> {m3idx.access = "write", m3idx.name = "out"}, %n: i64 {m3idx.name = "n"}) {
  %pid = m3idx.program_id
  m3idx.store %n, %out[%pid] : i64, memref<?xi64>
  return
}

// -----

// CHECK-LABEL: func.func @loop
// CHECK: %[[W:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[W1:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[CARRIED:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[W0:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[T0:.*]] = vector.load {{.*}} : memref<?xf32>, vector<8xf32>
// The wide init is copied into the loop's own buffer before the loop.
// CHECK: vector.store %{{.*}}, %[[W0]]
// CHECK: vector.load %[[W0]]
// CHECK: vector.store %{{.*}}, %[[CARRIED]]
// Narrow values and scalars are carried by scf.for; the bounds become index.
// CHECK: %[[R:.*]]:2 = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T:.*]] = %[[T0]], %[[S:.*]] = %{{.*}}) -> (vector<8xf32>, i64) {
// CHECK-NEXT: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[M:.*]] = arith.maximumf %[[T]], %{{.*}} : vector<8xf32>
// CHECK: vector.load %[[CARRIED]]
// CHECK: vector.load %[[W1]]
// CHECK: vector.store %{{.*}}, %[[W]]
// CHECK: %[[S1:.*]] = arith.addi %[[S]], %[[I64]] : i64
// The yield copies the wide value into the loop's buffer.
// CHECK: vector.load %[[W]]
// CHECK: vector.store %{{.*}}, %[[CARRIED]]
// CHECK: scf.yield %[[M]], %[[S1]] : vector<8xf32>, i64
// CHECK: vector.store %[[R]]#0
// CHECK: vector.load %[[CARRIED]]
func.func @loop(%buf: memref<?xf32>, %out: memref<?xf32>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t0 = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<8xf32>
  %w0 = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<128xf32>
  %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%t = %t0, %w = %w0, %s = %c0) -> (tensor<8xf32>, tensor<128xf32>, i64) : i64 {
    %t1 = m3idx.load_tile %buf[%i] : memref<?xf32> -> tensor<8xf32>
    %w1 = m3idx.load_tile %buf[%i] : memref<?xf32> -> tensor<128xf32>
    %m = arith.maximumf %t, %t1 : tensor<8xf32>
    %mw = arith.maximumf %w, %w1 : tensor<128xf32>
    %s1 = arith.addi %s, %i : i64
    scf.yield %m, %mw, %s1 : tensor<8xf32>, tensor<128xf32>, i64
  }
  m3idx.store_tile %r#0, %out[%c0] : tensor<8xf32>, memref<?xf32>
  m3idx.store_tile %r#1, %out[%r#2] : tensor<128xf32>, memref<?xf32>
  return
}

// -----

// CHECK-LABEL: func.func @branch
// CHECK: %[[ELSE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[JOINED:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[W:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[T:.*]] = vector.load {{.*}} : memref<?xf32>, vector<8xf32>
// CHECK: %[[R:.*]] = scf.if %{{.*}} -> (vector<8xf32>) {
// CHECK: vector.load %[[W]]
// CHECK: vector.store %{{.*}}, %[[JOINED]]
// CHECK: scf.yield %[[T]] : vector<8xf32>
// CHECK: } else {
// CHECK: arith.addf
// CHECK: vector.store %{{.*}}, %[[ELSE]]
// CHECK: vector.load %[[ELSE]]
// CHECK: vector.store %{{.*}}, %[[JOINED]]
// CHECK: scf.yield %[[T]] : vector<8xf32>
// CHECK: vector.store %[[R]]
// CHECK: vector.load %[[JOINED]]
func.func @branch(%buf: memref<?xf32>, %out: memref<?xf32>, %c: i1) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<8xf32>
  %w = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<128xf32>
  %r:2 = scf.if %c -> (tensor<8xf32>, tensor<128xf32>) {
    scf.yield %t, %w : tensor<8xf32>, tensor<128xf32>
  } else {
    %w2 = arith.addf %w, %w : tensor<128xf32>
    scf.yield %t, %w2 : tensor<8xf32>, tensor<128xf32>
  }
  m3idx.store_tile %r#0, %out[%c0] : tensor<8xf32>, memref<?xf32>
  m3idx.store_tile %r#1, %out[%c0] : tensor<128xf32>, memref<?xf32>
  return
}

// -----

// Wide iter args that swap places each trip: the yield copies one aside before writing either.
// CHECK-LABEL: func.func @swap
// CHECK: %[[ASIDE_A:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[ASIDE_B:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[B:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: %[[A:.*]] = memref.alloca() {alignment = 64 : i64} : memref<128xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: vector.load %[[B]]
// CHECK: vector.store %{{.*}}, %[[ASIDE_B]]
// CHECK: vector.load %[[A]]
// CHECK: vector.store %{{.*}}, %[[ASIDE_A]]
// CHECK: vector.load %[[ASIDE_B]]
// CHECK: vector.store %{{.*}}, %[[A]]
// CHECK: vector.load %[[ASIDE_A]]
// CHECK: vector.store %{{.*}}, %[[B]]
// CHECK: }
// CHECK: vector.load %[[A]]
func.func @swap(%buf: memref<?xf32>, %out: memref<?xf32>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %a0 = m3idx.load_tile %buf[%c0] : memref<?xf32> -> tensor<128xf32>
  %b0 = m3idx.load_tile %buf[%c1] : memref<?xf32> -> tensor<128xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %a0, %b = %b0) -> (tensor<128xf32>, tensor<128xf32>) : i64 {
    scf.yield %b, %a : tensor<128xf32>, tensor<128xf32>
  }
  m3idx.store_tile %r#0, %out[%c0] : tensor<128xf32>, memref<?xf32>
  return
}
