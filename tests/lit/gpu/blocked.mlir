// The GPU form of ops on blocked tiles (lowering/GpuOpPatterns.cpp, GpuRegionPatterns.cpp), the
// same on both GPU targets but for a program's threads (sm_90: a 32-thread warp; gfx950: a
// 64-lane wave): a tile of N lanes is each thread's vector<N / threads>.
// RUN: m3idx-opt %s --m3idx-to-sm90 --split-input-file | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: m3idx-opt %s --m3idx-to-gfx950 --split-input-file | FileCheck %s --check-prefixes=CHECK,GFX950

// The kernel function: a gpu.func of the program's threads; the program id is the block id.
// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @m3idx_kernels
// SM90: gpu.func @elementwise(%[[OUT:.*]]: memref<?xi64>, %[[X:.*]]: i64) kernel attributes {known_block_size = array<i32: 32, 1, 1>}
// GFX950: gpu.func @elementwise(%[[OUT:.*]]: memref<?xi64>, %[[X:.*]]: i64) kernel attributes {known_block_size = array<i32: 64, 1, 1>}
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[PID:.*]] = arith.index_cast %[[BID]] : index to i64
// iota: lane * k + [0, k)
// CHECK: %[[LANE:.*]] = arith.index_cast %[[TID]] : index to i64
// CHECK: %[[FIRST:.*]] = arith.muli %[[LANE]], %{{.*}} : i64
// CHECK: %[[BASE:.*]] = vector.broadcast %[[FIRST]] : i64 to vector<[[N:2|1]]xi64>
// SM90: %[[STEPS:.*]] = arith.constant dense<[0, 1]> : vector<2xi64>
// GFX950: %[[STEPS:.*]] = arith.constant dense<0> : vector<1xi64>
// CHECK: %[[IOTA:.*]] = arith.addi %[[BASE]], %[[STEPS]] : vector<[[N]]xi64>
// CHECK: %[[SPLAT:.*]] = vector.broadcast %[[PID]] : i64 to vector<[[N]]xi64>
// CHECK: %[[SUM:.*]] = arith.addi %[[IOTA]], %[[SPLAT]] : vector<[[N]]xi64>
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[SUM]], %[[SPLAT]] : vector<[[N]]xi64>
// CHECK: arith.select %[[LT]], %[[IOTA]], %[[SUM]] : vector<[[N]]xi1>, vector<[[N]]xi64>
// CHECK: vector.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<?xi64>, vector<[[N]]xi64>
// CHECK: gpu.return
// CHECK-NOT: tensor
// CHECK-NOT: m3idx.
func.func @elementwise(%out: memref<?xi64>, %x: i64) {
  %c0 = arith.constant 0 : i64
  %pid = m3idx.program_id
  %iota = m3idx.iota : tensor<64xi64>
  %splat = tensor.splat %pid : tensor<64xi64>
  %sum = arith.addi %iota, %splat : tensor<64xi64>
  %lt = arith.cmpi slt, %sum, %splat : tensor<64xi64>
  %pick = arith.select %lt, %iota, %sum : tensor<64xi1>, tensor<64xi64>
  m3idx.store_tile %pick, %out[%c0] : tensor<64xi64>, memref<?xi64>
  return
}

// -----

// maxnumf is llvm.intr.maxnum (no device-library call); a reduction is the thread's own lanes
// then an xor butterfly over the warp or wave; a scalar store is the first thread's; a loop gets
// index bounds, its i64 induction value cast back first thing.
// CHECK-LABEL: gpu.func @across_lanes
// CHECK: %[[T:.*]] = vector.load %{{.*}} : memref<?xf32>, vector<[[N:2|1]]xf32>
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[T]]) -> (vector<[[N]]xf32>) {
// CHECK-NEXT: arith.index_cast %[[I]] : index to i64
// CHECK-NEXT: llvm.intr.maxnum(%{{.*}}, %{{.*}}) : (vector<[[N]]xf32>, vector<[[N]]xf32>) -> vector<[[N]]xf32>
// CHECK: vector.reduction <maxnumf>, %{{.*}} fastmath<reassoc> : vector<[[N]]xf32> into f32
// SM90: gpu.shuffle xor %{{.*}}, %{{.*}}, %c32_i32 : f32
// SM90-NOT: gpu.shuffle xor {{.*}} %c64_i32
// GFX950: gpu.shuffle xor %{{.*}}, %{{.*}}, %c64_i32 : f32
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i64
// CHECK: scf.if %[[FIRST]] {
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: memref.store
func.func @across_lanes(%out: memref<?xf32>, %x: f32) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4 = arith.constant 4 : i64
  %s = tensor.splat %x : tensor<64xf32>
  %t = m3idx.load_tile %out[%c0] : memref<?xf32> -> tensor<64xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %t) -> (tensor<64xf32>) : i64 {
    %n = arith.maxnumf %acc, %s : tensor<64xf32>
    scf.yield %n : tensor<64xf32>
  }
  %best = m3idx.reduce_max %r : tensor<64xf32> -> f32
  m3idx.store %best, %out[%c0] : f32, memref<?xf32>
  return
}

// -----

// atomic_add: a barrier, a release fence of the device's scope, the first thread's atomic, its
// old value to every lane by a shuffle, an acquire fence.
// CHECK-LABEL: gpu.func @atomic
// SM90: nvvm.bar.warp.sync
// GFX950: gpu.barrier
// SM90: llvm.fence syncscope("device") release
// GFX950: llvm.fence syncscope("agent") release
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.shuffle idx
// SM90: llvm.fence syncscope("device") acquire
// GFX950: llvm.fence syncscope("agent") acquire
func.func @atomic(%count: memref<?xi32>) {
  %c0 = arith.constant 0 : i64
  %one = arith.constant 1 : i32
  %old = m3idx.atomic_add %count[%c0], %one : memref<?xi32>, i32
  m3idx.store %old, %count[%c0] : i32, memref<?xi32>
  return
}

// -----

// A dot_tiles no matrix unit takes runs on FFMA: b staged as f32 in workgroup memory, each
// thread's slice of a row dotted with it, results through a workgroup buffer.
// CHECK-LABEL: gpu.func @ffma_dot
// CHECK-SAME: workgroup(%[[STAGE:.*]] : memref<256xf32, #gpu.address_space<workgroup>>, %[[RES:.*]] : memref<4xf32, #gpu.address_space<workgroup>>)
// CHECK: vector.store %{{.*}}, %[[STAGE]]
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc,contract> : vector<{{[0-9]+}}xf32> into f32
// CHECK: memref.store %{{.*}}, %[[RES]]
func.func @ffma_dot(%a: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %x = m3idx.load_tile %a[%c0] : memref<?xf32> -> tensor<256xf32>
  %y = m3idx.load_tile %a[%c0] : memref<?xf32> -> tensor<256xf32>
  %d = m3idx.dot_tiles %x, %y, 128 : tensor<256xf32>, tensor<256xf32> -> tensor<4xf32>
  m3idx.store_tile %d, %out[%c0] : tensor<4xf32>, memref<?xf32>
  return
}

// -----

// A staged loop's hand-over (stage) with the roles in one group: its values as the producer made
// them, no buffer and no barrier.
// CHECK-LABEL: gpu.func @staged
// CHECK: scf.for
// CHECK: %[[T:.*]] = vector.load %{{.*}} : memref<?xf32>, vector<[[N:2|1]]xf32>
// CHECK-NOT: gpu.barrier
// CHECK: llvm.intr.maxnum(%{{.*}}, %[[T]]) : (vector<[[N]]xf32>, vector<[[N]]xf32>) -> vector<[[N]]xf32>
func.func @staged(%out: memref<?xf32>, %x: f32) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4 = arith.constant 4 : i64
  %c64 = arith.constant 64 : i64
  %s = tensor.splat %x : tensor<64xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %s) -> (tensor<64xf32>) : i64 {
    %at = arith.muli %i, %c64 : i64
    %t = m3idx.load_tile %out[%at] : memref<?xf32> -> tensor<64xf32>
    %staged = m3idx.stage %t {stages = 3 : i64} : tensor<64xf32> -> tensor<64xf32>
    %n = arith.maxnumf %acc, %staged : tensor<64xf32>
    scf.yield %n : tensor<64xf32>
  }
  %best = m3idx.reduce_max %r : tensor<64xf32> -> f32
  m3idx.store %best, %out[%c0] : f32, memref<?xf32>
  return
}

// -----

// load_gather: each lane's load under its mask (else 0). A shuffle whose every lane comes from its
// own thread's lanes, at the same place in every thread (here xor 1 on 4 lanes a thread on sm_90,
// 2 on gfx950), is a vector.shuffle of the thread's registers: no workgroup buffer, no barrier.
// CHECK-LABEL: gpu.func @gather_and_in_thread_shuffle
// CHECK: scf.if %{{.*}} -> (f32) {
// CHECK-NEXT: vector.extract
// CHECK-NEXT: arith.index_cast
// CHECK-NEXT: memref.load
// CHECK: } else {
// SM90: vector.shuffle %{{.*}}, %{{.*}} [1, 0, 3, 2] : vector<4xf32>, vector<4xf32>
// GFX950: vector.shuffle %{{.*}}, %{{.*}} [1, 0] : vector<2xf32>, vector<2xf32>
// CHECK-NOT: gpu.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: gpu.return
func.func @gather_and_in_thread_shuffle(%in: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %at = m3idx.iota : tensor<128xi64>
  %odd = arith.trunci %at : tensor<128xi64> to tensor<128xi1>
  %g = m3idx.load_gather %in[%at], %odd : memref<?xf32>, tensor<128xi64>, tensor<128xi1> -> tensor<128xf32>
  %p = m3idx.shuffle %g, %g [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 17, 16, 19, 18, 21, 20, 23, 22, 25, 24, 27, 26, 29, 28, 31, 30, 33, 32, 35, 34, 37, 36, 39, 38, 41, 40, 43, 42, 45, 44, 47, 46, 49, 48, 51, 50, 53, 52, 55, 54, 57, 56, 59, 58, 61, 60, 63, 62, 65, 64, 67, 66, 69, 68, 71, 70, 73, 72, 75, 74, 77, 76, 79, 78, 81, 80, 83, 82, 85, 84, 87, 86, 89, 88, 91, 90, 93, 92, 95, 94, 97, 96, 99, 98, 101, 100, 103, 102, 105, 104, 107, 106, 109, 108, 111, 110, 113, 112, 115, 114, 117, 116, 119, 118, 121, 120, 123, 122, 125, 124, 127, 126] : tensor<128xf32>, tensor<128xf32> -> tensor<128xf32>
  m3idx.store_tile %p, %out[%c0] : tensor<128xf32>, memref<?xf32>
  return
}

// -----

// A one-lane-a-thread shuffle on a wave64 taking lanes 32-63 from its second operand: the select's
// lane mask is an exact i64 (bits 32-63; it had been a 32-bit shift past its width).
// CHECK-LABEL: gpu.func @wave_halves
// GFX950: arith.constant -4294967296 : i64
func.func @wave_halves(%out: memref<?xf32>, %x: f32, %y: f32) {
  %c0 = arith.constant 0 : i64
  %a = tensor.splat %x : tensor<64xf32>
  %b = tensor.splat %y : tensor<64xf32>
  %p = m3idx.shuffle %a, %b [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127] : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  m3idx.store_tile %p, %out[%c0] : tensor<64xf32>, memref<?xf32>
  return
}

// -----

// load_tile's and store_tile's alignment promises reach each thread's vector access (the smaller
// of the promise and the thread's part), so 16-byte parts are one wide access each.
// CHECK-LABEL: gpu.func @aligned_copy
// SM90: vector.load {{.*}} {alignment = 16 : i64} : memref<?xi8>, vector<16xi8>
// SM90: vector.store {{.*}} {alignment = 16 : i64} : memref<?xi8>, vector<16xi8>
// GFX950: vector.load {{.*}} {alignment = 8 : i64} : memref<?xi8>, vector<8xi8>
// GFX950: vector.store {{.*}} {alignment = 8 : i64} : memref<?xi8>, vector<8xi8>
func.func @aligned_copy(%in: memref<?xi8>, %out: memref<?xi8>, %at: i64) {
  %t = m3idx.load_tile %in[%at] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
  m3idx.store_tile %t, %out[%at] {align = 16 : i32} : tensor<512xi8>, memref<?xi8>
  return
}
