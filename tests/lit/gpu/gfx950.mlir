// gfx950's program (lowering/rocdl/Gfx950Program.cpp) and pattern (rocdl/Gfx950Patterns.cpp): a
// wave of 64 lanes, every tile blocked; the NVFP4 decode through the CDNA4 conversions and a
// dot_tiles of 16 keys on one MFMA.
// RUN: m3idx-opt %s --m3idx-to-gfx950 | FileCheck %s

// The decode: v_cvt_scalef32_pk_f32_fp4 (scale 1.0) per nibble pair, an f32 multiply by the
// scale, a NaN-keeping clamp, v_cvt_pk_fp8_f32; the keys into the A layout with 8 dword shuffles,
// one v_mfma_f32_16x16x128_f8f6f4 against b's B fragment (b staged as bytes), results fetched
// from their owners by shuffles. No key table, no register cap.
// CHECK-LABEL: gpu.func @mfma
// CHECK-SAME: workgroup(%{{.*}} : memref<512xi8, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
// CHECK: amdgpu.scaled_ext_packed %{{.*}}[0], %{{.*}} : vector<8xf4E2M1FN> to vector<2xf32>
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: amdgpu.packed_trunc_2xfp8
// CHECK-COUNT-8: gpu.shuffle idx %{{.*}}, %{{.*}}, %c64_i32{{.*}} : i32
// CHECK: amdgpu.mfma 16x16x128
// CHECK: gpu.shuffle idx {{.*}} : f32
// CHECK-NOT: nvvm
// CHECK-NOT: amdgpu.mfma
// CHECK: gpu.return
func.func @mfma(%kv: memref<?xi8>, %out: memref<?xf32>, %floor: f32) {
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
