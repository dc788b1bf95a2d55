// sm_90's own patterns (lowering/nvvm/Sm90Patterns.cpp) and program (nvvm/Sm90Program.h) on tiles
// its layout pass (nvvm/Sm90Layouts.cpp, run first by --m3idx-to-sm90) puts in fragment order.
// RUN: m3idx-opt %s --m3idx-to-sm90 --split-input-file | FileCheck %s

// mma.sync: the keys' bytes and scales loaded straight into A-fragment registers (an empty asm per
// word), decoded through the shared key table with prmt, 4 K steps x 2 halves of
// m16n8k16 on the one column tile, the group max in-thread then a butterfly; b staged as bytes,
// the key table in workgroup memory, a register cap.
// CHECK-LABEL: gpu.func @mma_sync
// CHECK-SAME: workgroup(%{{.*}} : memref<512xi8, #gpu.address_space<workgroup>>, %{{.*}} : memref<512xi32, #gpu.address_space<workgroup>>)
// CHECK-SAME: nvvm.maxnreg = 96 : i32
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: nvvm.prmt
// CHECK-COUNT-8: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
// CHECK: llvm.intr.maxnum({{.*}}) : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK: gpu.shuffle xor
// CHECK-NOT: llvm.call_intrinsic "llvm.nvvm.mma
// CHECK: gpu.return
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

// A dot's results also read blocked: the convert_layout's accumulators through a workgroup buffer
// of the tile's 64 lanes, between two barriers, for both uses.
// CHECK-LABEL: gpu.func @result_read_blocked
// CHECK-SAME: workgroup(%{{.*}} : memref<512xi8, #gpu.address_space<workgroup>>, %[[CONVERT:.*]] : memref<64xf32, #gpu.address_space<workgroup>>,
// CHECK-COUNT-8: llvm.nvvm.mma.m16n8k16
// CHECK: memref.store %{{.*}}, %[[CONVERT]]
// CHECK: nvvm.bar.warp.sync
// CHECK: vector.load %[[CONVERT]]
// CHECK: nvvm.bar.warp.sync
// CHECK: vector.store %{{.*}}, %{{.*}} : memref<?xf32>, vector<2xf32>
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

// A warpgroup (4 warps): 64 key tokens against 64 query columns on wgmma m64n64k16 (B widened into
// a 1024-byte-aligned swizzled buffer, fenced for the async proxy), one commit and wait; the token
// pairs folded in-thread, the group max of a warp's 8 threads of a column as a transposing
// butterfly (16 maxima a thread: 8, 4 and 2 shuffles, each thread then storing 2 columns' warp
// maxima itself), the warps' through a two-turn exchange.
// CHECK-LABEL: gpu.func @wgmma
// CHECK-SAME: workgroup(%{{.*}} : memref<16384xi8, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64}, %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<512xi32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>, nvvm.maxnreg = 128 : i32
// CHECK: %[[TURN:.*]] = memref.alloca() : memref<1xi64>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.intr.maxnum
// CHECK: memref.load %[[TURN]]
// CHECK-COUNT-8: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK-COUNT-4: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK-COUNT-2: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-2: memref.store %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: scf.if
// CHECK: gpu.barrier
func.func @wgmma(%kv: memref<?xi8>, %out: memref<?xf32>) attributes {m3idx.warps = 4 : i64} {
  %c0 = arith.constant 0 : i64
  %c4096 = arith.constant 4096 : i64
  %c8192 = arith.constant 8192 : i64
  %packed = m3idx.load_tile %kv[%c0] {align = 16 : i32} : memref<?xi8> -> tensor<4096xi8>
  %scales = m3idx.load_tile %kv[%c4096] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
  %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<4096xi8>, tensor<512xi8> -> tensor<8192xf8E4M3FN>
  %qb = m3idx.load_tile %kv[%c8192] : memref<?xi8> -> tensor<8192xi8>
  %q = arith.bitcast %qb : tensor<8192xi8> to tensor<8192xf8E4M3FN>
  %dots = m3idx.dot_tiles %keys, %q, 128 : tensor<8192xf8E4M3FN>, tensor<8192xf8E4M3FN> -> tensor<4096xf32>
  %folded = m3idx.fold_max %dots, 8 : tensor<4096xf32> -> tensor<2048xf32>
  %best = m3idx.reduce_max_groups %folded, 64 : tensor<2048xf32> -> tensor<64xf32>
  m3idx.store_tile %best, %out[%c0] : tensor<64xf32>, memref<?xf32>
  return
}

// -----

// Accumulator order given (the layout pass is not run on tiles that carry layouts): an iota in
// mma_acc order is each accumulator's (column, token) lane, not the blocked lane * k + [0, k), and
// the group max of accumulators is an in-thread max, xor 4, 8, 16 over the threads of the tokens
// and an indexed shuffle to the group's lane, once per column parity.
// CHECK-LABEL: gpu.func @acc_iota
// CHECK-NOT: arith.constant dense<[0, 1]>
// CHECK: arith.sitofp %{{.*}} : vector<4xi64> to vector<4xf32>
// CHECK: llvm.intr.maxnum
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.shuffle idx
// CHECK: llvm.intr.maxnum
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle idx
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @acc_iota(%out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %iota = m3idx.iota : tensor<64xi64, #m3idx.layout<mma_acc>>
  %f = arith.sitofp %iota : tensor<64xi64, #m3idx.layout<mma_acc>> to tensor<64xf32, #m3idx.layout<mma_acc>>
  %best = m3idx.reduce_max_groups %f, 4 : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<4xf32, #m3idx.layout<blocked>>
  m3idx.store_tile %best, %out[%c0] : tensor<4xf32, #m3idx.layout<blocked>>, memref<?xf32>
  return
}

// -----

// griddepcontrol as inline PTX with a memory clobber (LLVM's intrinsics touch no memory).
// CHECK-LABEL: gpu.func @grids
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", "~{memory}"
func.func @grids() {
  m3idx.grid_await
  m3idx.grid_release
  return
}

// -----

// program_sync: the program's barrier (a one-warp program's bar.warp.sync, which as bar.sync
// orders global memory among the threads it joins) between a store and a later load.
// CHECK-LABEL: gpu.func @program_sync
// CHECK: memref.store %{{.*}}, %arg0
// CHECK: nvvm.bar.warp.sync
// CHECK: memref.load %arg0
func.func @program_sync(%buf: memref<?xi32>, %out: memref<?xi32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %x = arith.constant 7 : i32
  m3idx.store %x, %buf[%c0] : i32, memref<?xi32>
  m3idx.program_sync
  %y = m3idx.load %buf[%c1] : memref<?xi32> -> i32
  m3idx.store %y, %out[%c0] : i32, memref<?xi32>
  return
}

// -----

// atomic_add in a warpgroup (4 warps): no shuffle reaches across them, so the first thread
// acquires, writes the old value to a workgroup word, and every thread reads it between two
// barriers (before this, a lowering error: "a lane shuffle across the warps").
// CHECK-LABEL: gpu.func @atomic_warpgroup
// CHECK-SAME: workgroup(%[[WORD:.*]] : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK: llvm.fence syncscope("device") release
// CHECK: %[[OLD:.*]] = memref.atomic_rmw addi
// CHECK-NEXT: llvm.fence syncscope("device") acquire
// CHECK-NEXT: memref.store %[[OLD]], %[[WORD]]
// CHECK: gpu.barrier
// CHECK-NEXT: memref.load %[[WORD]]
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: llvm.fence syncscope("device") acquire
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.return
func.func @atomic_warpgroup(%count: memref<?xi32>) attributes {m3idx.warps = 4 : i64} {
  %c0 = arith.constant 0 : i64
  %one = arith.constant 1 : i32
  %old = m3idx.atomic_add %count[%c0], %one : memref<?xi32>, i32
  m3idx.store %old, %count[%c0] : i32, memref<?xi32>
  return
}

// -----

// A decode that first needs the key table inside a loop (decode_keys' form): the table is filled
// once, before the loop, behind its barrier; inside the loop each trip only reads it (filled
// there, a trip's writes raced the other warps' reads of the last trip: racecheck's hazard).
// CHECK-LABEL: gpu.func @key_table_before_loop
// CHECK: scf.for
// CHECK: vector.store {{.*}} : memref<512xi32, #gpu.address_space<workgroup>>, vector<2xi32>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK-NOT: vector.store {{.*}} : memref<512xi32, #gpu.address_space<workgroup>>
// CHECK: nvvm.prmt
// CHECK: vector.store {{.*}} : memref<?xi8>, vector<16xi8>
// CHECK: gpu.return
func.func @key_table_before_loop(%kv: memref<?xi8>, %out: memref<?xi8>) attributes {m3idx.warps = 4 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c8 = arith.constant 8 : i64
  %c1024 = arith.constant 1024 : i64
  %c2048 = arith.constant 2048 : i64
  %c8192 = arith.constant 8192 : i64
  scf.for %t = %c0 to %c8 step %c1 : i64 {
    %at = arith.muli %t, %c1024 : i64
    %packed = m3idx.load_tile %kv[%at] {align = 16 : i32} : memref<?xi8> -> tensor<1024xi8>
    %sat = arith.addi %at, %c8192 : i64
    %scales = m3idx.load_tile %kv[%sat] {align = 16 : i32} : memref<?xi8> -> tensor<128xi8>
    %keys = m3idx.decode_nvfp4 %packed, %scales : tensor<1024xi8>, tensor<128xi8> -> tensor<2048xf8E4M3FN>
    %bytes = arith.bitcast %keys : tensor<2048xf8E4M3FN> to tensor<2048xi8>
    %to = arith.muli %t, %c2048 : i64
    m3idx.store_tile %bytes, %out[%to] {align = 16 : i32} : tensor<2048xi8>, memref<?xi8>
  }
  return
}
