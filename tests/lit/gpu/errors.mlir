// What a GPU target does not take is an error naming it (lowering/GpuConversion.cpp and the
// patterns), with the kernel line of its op where there is one.
// RUN: not m3idx-opt %s --m3idx-to-gfx950 --split-input-file 2>&1 | FileCheck %s --check-prefix=GFX950
// RUN: not m3idx-opt %s --m3idx-to-sm90 --split-input-file 2>&1 | FileCheck %s --check-prefix=SM90

// GFX950: kernel @warpgroup: 4 warps per program: gfx950 programs are one wave
// SM90: gpu.func @warpgroup
func.func @warpgroup(%out: memref<?xf32>) attributes {m3idx.warps = 4 : i64} {
  return
}

// -----

// A tile in a layout of another target's.
// GFX950: kernel @foreign_layout: GPU lowering: gfx950 has no type for a tile in layout mma_acc
// SM90: gpu.func @foreign_layout
func.func @foreign_layout(%out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %x = arith.constant 1.0 : f32
  %t = tensor.splat %x : tensor<64xf32, #m3idx.layout<mma_acc>>
  %best = m3idx.reduce_max_groups %t, 4 : tensor<64xf32, #m3idx.layout<mma_acc>> -> tensor<4xf32, #m3idx.layout<blocked>>
  m3idx.store_tile %best, %out[%c0] : tensor<4xf32, #m3idx.layout<blocked>>, memref<?xf32>
  return
}

// -----

// fold.max pairs must be in one thread's lanes: 64 lanes on 32 threads are 2 a thread.
// GFX950: kernel @fold_across_threads: GPU lowering: fold.max: pairs 8 apart across threads (64 lanes, 1 per thread)
// SM90: kernel @fold_across_threads: GPU lowering: fold.max: pairs 8 apart across threads (64 lanes, 2 per thread)
func.func @fold_across_threads(%out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %out[%c0] : memref<?xf32> -> tensor<64xf32>
  %f = m3idx.fold_max %t, 8 : tensor<64xf32> -> tensor<32xf32>
  m3idx.store_tile %f, %out[%c0] : tensor<32xf32>, memref<?xf32>
  return
}

// -----

// A dot whose staged b (128 rows of 128 f32 on FFMA) takes more workgroup memory than a program may.
// GFX950: kernel @dot_too_wide: dot.tiles needs 66560 bytes of workgroup memory (at most 40960)
// SM90: kernel @dot_too_wide: dot.tiles needs 66560 bytes of workgroup memory (at most 40960)
func.func @dot_too_wide(%a: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : i64
  %x = m3idx.load_tile %a[%c0] : memref<?xf32> -> tensor<256xf32>
  %y = m3idx.load_tile %a[%c0] : memref<?xf32> -> tensor<16384xf32>
  %d = m3idx.dot_tiles %x, %y, 128 : tensor<256xf32>, tensor<16384xf32> -> tensor<256xf32>
  m3idx.store_tile %d, %out[%c0] : tensor<256xf32>, memref<?xf32>
  return
}

// -----

// Warps a program cannot have (0 divided the lanes among no threads before this was checked).
// GFX950: @no_warps has m3idx.warps 0 (a program runs 1 to 32 warps)
// SM90: @no_warps has m3idx.warps 0 (a program runs 1 to 32 warps)
func.func @no_warps(%out: memref<?xf32>) attributes {m3idx.warps = 0 : i64} {
  %c0 = arith.constant 0 : i64
  %t = m3idx.load_tile %out[%c0] : memref<?xf32> -> tensor<64xf32>
  m3idx.store_tile %t, %out[%c0] : tensor<64xf32>, memref<?xf32>
  return
}
