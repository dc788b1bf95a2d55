// m3idx inspect score_prefill --heads 1 (heads=1,rows=128,tokens=64,warps=4,fold,unroll=4,narrow) --target sm_90 --emit tile
// pipeline: m3idx-expand-small-floats,canonicalize,cse,gpu.module(convert-vector-to-scf,convert-scf-to-cf),nvvm-attach-target{chip=sm_90a features=+ptx84 O=3},gpu.module(convert-gpu-to-nvvm,convert-nvvm-to-llvm,convert-vector-to-llvm,convert-arith-to-llvm,canonicalize,cse,convert-ub-to-llvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa}
module {
  func.func @score_prefill(%arg0: memref<?xi8> {m3idx.access = "read", m3idx.name = "q"}, %arg1: memref<?xi8> {m3idx.access = "read", m3idx.name = "kv"}, %arg2: memref<?xi32> {m3idx.access = "read", m3idx.name = "block_table"}, %arg3: memref<?xi32> {m3idx.access = "read", m3idx.name = "seq_lens"}, %arg4: memref<?xi32> {m3idx.access = "read", m3idx.name = "query_start_loc"}, %arg5: memref<?xi32> {m3idx.access = "read", m3idx.name = "tile_request"}, %arg6: memref<?xi32> {m3idx.access = "read", m3idx.name = "tile_row_begin"}, %arg7: memref<?xf32> {m3idx.access = "write", m3idx.name = "scores"}, %arg8: i64 {m3idx.name = "num_rows"}, %arg9: i64 {m3idx.name = "max_blocks"}, %arg10: i64 {m3idx.name = "width"}, %arg11: i64 {m3idx.name = "grid_chunks"}, %arg12: i64 {m3idx.name = "blocks_per_program"}, %arg13: i64 {m3idx.name = "init_blocks"}, %arg14: i64 {m3idx.name = "local_blocks"}) attributes {m3idx.warps = 4 : i64} {
    %0 = m3idx.program_id
    %1 = arith.divsi %0, %arg11 : i64
    %2 = m3idx.load %arg5[%1] : memref<?xi32> -> i32
    %3 = arith.extsi %2 : i32 to i64
    %4 = m3idx.load %arg6[%1] : memref<?xi32> -> i32
    %5 = arith.extsi %4 : i32 to i64
    %6 = m3idx.load %arg4[%3] : memref<?xi32> -> i32
    %7 = arith.extsi %6 : i32 to i64
    %c1_i64 = arith.constant 1 : i64
    %8 = arith.addi %3, %c1_i64 : i64
    %9 = m3idx.load %arg4[%8] : memref<?xi32> -> i32
    %10 = arith.extsi %9 : i32 to i64
    %11 = m3idx.load %arg3[%3] : memref<?xi32> -> i32
    %12 = arith.extsi %11 : i32 to i64
    %13 = arith.subi %10, %7 : i64
    %c0_i64 = arith.constant 0 : i64
    %c128_i64 = arith.constant 128 : i64
    %14 = arith.subi %10, %5 : i64
    %15 = arith.minsi %14, %c128_i64 : i64
    %16 = arith.addi %5, %15 : i64
    %c1_i64_0 = arith.constant 1 : i64
    %17 = arith.subi %16, %c1_i64_0 : i64
    %18 = arith.subi %17, %7 : i64
    %19 = arith.subi %12, %13 : i64
    %20 = arith.addi %19, %18 : i64
    %c1_i64_1 = arith.constant 1 : i64
    %21 = arith.addi %20, %c1_i64_1 : i64
    %22 = arith.maxsi %21, %c0_i64 : i64
    %c127_i64 = arith.constant 127 : i64
    %23 = arith.addi %22, %c127_i64 : i64
    %c128_i64_2 = arith.constant 128 : i64
    %24 = arith.divsi %23, %c128_i64_2 : i64
    %25 = arith.remsi %0, %arg11 : i64
    %26 = arith.muli %25, %arg12 : i64
    %27 = arith.addi %26, %arg12 : i64
    %28 = arith.minsi %27, %24 : i64
    %29 = arith.cmpi slt, %26, %28 : i64
    scf.if %29 {
      %c128_i64_3 = arith.constant 128 : i64
      %30 = arith.muli %15, %c128_i64_3 : i64
      %31 = arith.subi %5, %7 : i64
      %32 = arith.subi %12, %13 : i64
      %33 = arith.addi %32, %31 : i64
      %c1_i64_4 = arith.constant 1 : i64
      %34 = arith.addi %33, %c1_i64_4 : i64
      %35 = arith.maxsi %34, %c0_i64 : i64
      %c128_i64_5 = arith.constant 128 : i64
      %36 = arith.cmpi eq, %15, %c128_i64_5 : i64
      %37 = arith.select %36, %35, %c0_i64 : i64
      %38 = arith.subi %12, %13 : i64
      %39 = arith.addi %38, %5 : i64
      %40 = arith.subi %39, %7 : i64
      %c1_i64_6 = arith.constant 1 : i64
      %41 = arith.addi %40, %c1_i64_6 : i64
      %cst = arith.constant 0xFF800000 : f32
      %splat = tensor.splat %cst : tensor<8192xf32>
      %cst_7 = arith.constant 0xFF800000 : f32
      %splat_8 = tensor.splat %cst_7 : tensor<4096xf32>
      %42 = m3idx.iota : tensor<128xi64>
      %c1_i64_9 = arith.constant 1 : i64
      %splat_10 = tensor.splat %c1_i64_9 : tensor<128xi64>
      %43 = arith.remsi %42, %splat_10 : tensor<128xi64>
      %c128_i64_11 = arith.constant 128 : i64
      %44 = arith.divsi %37, %c128_i64_11 : i64
      %45 = arith.minsi %44, %28 : i64
      %46 = arith.maxsi %45, %26 : i64
      %47 = arith.muli %3, %arg9 : i64
      %48 = arith.addi %47, %26 : i64
      %49 = m3idx.load %arg2[%48] : memref<?xi32> -> i32
      %50 = arith.extsi %49 : i32 to i64
      %c9216_i64 = arith.constant 9216 : i64
      %51 = arith.muli %50, %c9216_i64 : i64
      %c0_i64_12 = arith.constant 0 : i64
      %c64_i64 = arith.constant 64 : i64
      %52 = arith.muli %c0_i64_12, %c64_i64 : i64
      %c64_i64_13 = arith.constant 64 : i64
      %53 = arith.muli %52, %c64_i64_13 : i64
      %54 = arith.addi %51, %53 : i64
      %55 = m3idx.load_tile %arg1[%54] {align = 16 : i32} : memref<?xi8> -> tensor<4096xi8>
      %c8_i64 = arith.constant 8 : i64
      %56 = arith.muli %52, %c8_i64 : i64
      %c8192_i64 = arith.constant 8192 : i64
      %57 = arith.addi %51, %c8192_i64 : i64
      %58 = arith.addi %57, %56 : i64
      %59 = m3idx.load_tile %arg1[%58] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
      %c128_i64_14 = arith.constant 128 : i64
      %60 = arith.muli %5, %c128_i64_14 : i64
      %61 = m3idx.load_tile_masked %arg0[%60], %30 : memref<?xi8> -> tensor<16384xi8>
      %62 = arith.bitcast %61 : tensor<16384xi8> to tensor<16384xf8E4M3FN>
      %c1_i64_15 = arith.constant 1 : i64
      %63:3 = scf.for %arg15 = %26 to %46 step %c1_i64_15 iter_args(%arg16 = %51, %arg17 = %55, %arg18 = %59) -> (i64, tensor<4096xi8>, tensor<512xi8>)  : i64 {
        %c1_i64_17 = arith.constant 1 : i64
        %65 = arith.subi %28, %c1_i64_17 : i64
        %c1_i64_18 = arith.constant 1 : i64
        %66 = arith.addi %arg15, %c1_i64_18 : i64
        %67 = arith.minsi %66, %65 : i64
        %68 = arith.muli %3, %arg9 : i64
        %69 = arith.addi %68, %67 : i64
        %70 = m3idx.load %arg2[%69] : memref<?xi32> -> i32
        %71 = arith.extsi %70 : i32 to i64
        %c9216_i64_19 = arith.constant 9216 : i64
        %72 = arith.muli %71, %c9216_i64_19 : i64
        %c1_i64_20 = arith.constant 1 : i64
        %c2_i64 = arith.constant 2 : i64
        %c0_i64_21 = arith.constant 0 : i64
        %73:3 = scf.for %arg19 = %c0_i64_21 to %c2_i64 step %c1_i64_20 iter_args(%arg20 = %splat_8, %arg21 = %arg17, %arg22 = %arg18) -> (tensor<4096xf32>, tensor<4096xi8>, tensor<512xi8>)  : i64 {
          %c1_i64_41 = arith.constant 1 : i64
          %92 = arith.cmpi eq, %arg19, %c1_i64_41 : i64
          %c1_i64_42 = arith.constant 1 : i64
          %93 = arith.addi %arg19, %c1_i64_42 : i64
          %c0_i64_43 = arith.constant 0 : i64
          %94 = arith.select %92, %c0_i64_43, %93 : i64
          %95 = arith.select %92, %72, %arg16 : i64
          %c64_i64_44 = arith.constant 64 : i64
          %96 = arith.muli %94, %c64_i64_44 : i64
          %c64_i64_45 = arith.constant 64 : i64
          %97 = arith.muli %96, %c64_i64_45 : i64
          %98 = arith.addi %95, %97 : i64
          %99 = m3idx.load_tile %arg1[%98] {align = 16 : i32} : memref<?xi8> -> tensor<4096xi8>
          %c8_i64_46 = arith.constant 8 : i64
          %100 = arith.muli %96, %c8_i64_46 : i64
          %c8192_i64_47 = arith.constant 8192 : i64
          %101 = arith.addi %95, %c8192_i64_47 : i64
          %102 = arith.addi %101, %100 : i64
          %103 = m3idx.load_tile %arg1[%102] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
          %104 = m3idx.decode_nvfp4 %arg21, %arg22 : tensor<4096xi8>, tensor<512xi8> -> tensor<8192xf8E4M3FN>
          %105 = m3idx.dot_tiles %104, %62, 128 : tensor<8192xf8E4M3FN>, tensor<16384xf8E4M3FN> -> tensor<8192xf32>
          %106 = m3idx.fold_max %105, 8 : tensor<8192xf32> -> tensor<4096xf32>
          %107 = arith.maxnumf %arg20, %106 : tensor<4096xf32>
          scf.yield %107, %99, %103 : tensor<4096xf32>, tensor<4096xi8>, tensor<512xi8>
        } {m3idx.unroll = 4 : i64}
        %74 = m3idx.reduce_max_groups %73#0, 128 : tensor<4096xf32> -> tensor<128xf32>
        %splat_22 = tensor.splat %41 : tensor<128xi64>
        %75 = arith.addi %42, %splat_22 : tensor<128xi64>
        %splat_23 = tensor.splat %c0_i64 : tensor<128xi64>
        %76 = arith.maxsi %75, %splat_23 : tensor<128xi64>
        %splat_24 = tensor.splat %15 : tensor<128xi64>
        %77 = arith.cmpi slt, %42, %splat_24 : tensor<128xi64>
        %splat_25 = tensor.splat %c0_i64 : tensor<128xi64>
        %78 = arith.select %77, %76, %splat_25 : tensor<128xi1>, tensor<128xi64>
        %c127_i64_26 = arith.constant 127 : i64
        %splat_27 = tensor.splat %c127_i64_26 : tensor<128xi64>
        %79 = arith.addi %78, %splat_27 : tensor<128xi64>
        %c128_i64_28 = arith.constant 128 : i64
        %splat_29 = tensor.splat %c128_i64_28 : tensor<128xi64>
        %80 = arith.divsi %79, %splat_29 : tensor<128xi64>
        %cst_30 = arith.constant 1.000000e+30 : f32
        %81 = arith.cmpi slt, %arg15, %arg13 : i64
        %splat_31 = tensor.splat %cst_30 : tensor<128xf32>
        %82 = arith.select %81, %splat_31, %74 : tensor<128xf32>
        %cst_32 = arith.constant 1.000000e+29 : f32
        %splat_33 = tensor.splat %arg14 : tensor<128xi64>
        %83 = arith.subi %80, %splat_33 : tensor<128xi64>
        %splat_34 = tensor.splat %arg15 : tensor<128xi64>
        %84 = arith.cmpi sge, %splat_34, %83 : tensor<128xi64>
        %splat_35 = tensor.splat %cst_32 : tensor<128xf32>
        %85 = arith.select %84, %splat_35, %82 : tensor<128xi1>, tensor<128xf32>
        %splat_36 = tensor.splat %arg8 : tensor<128xi64>
        %86 = arith.muli %43, %splat_36 : tensor<128xi64>
        %splat_37 = tensor.splat %5 : tensor<128xi64>
        %87 = arith.addi %86, %splat_37 : tensor<128xi64>
        %88 = arith.addi %87, %42 : tensor<128xi64>
        %splat_38 = tensor.splat %arg10 : tensor<128xi64>
        %89 = arith.muli %88, %splat_38 : tensor<128xi64>
        %splat_39 = tensor.splat %arg15 : tensor<128xi64>
        %90 = arith.addi %89, %splat_39 : tensor<128xi64>
        %splat_40 = tensor.splat %arg15 : tensor<128xi64>
        %91 = arith.cmpi slt, %splat_40, %80 : tensor<128xi64>
        m3idx.store_scatter %85, %arg7[%90], %91 : tensor<128xf32>, memref<?xf32>, tensor<128xi64>, tensor<128xi1>
        scf.yield %72, %73#1, %73#2 : i64, tensor<4096xi8>, tensor<512xi8>
      }
      %c1_i64_16 = arith.constant 1 : i64
      %64:3 = scf.for %arg15 = %46 to %28 step %c1_i64_16 iter_args(%arg16 = %63#0, %arg17 = %63#1, %arg18 = %63#2) -> (i64, tensor<4096xi8>, tensor<512xi8>)  : i64 {
        %c1_i64_17 = arith.constant 1 : i64
        %65 = arith.subi %28, %c1_i64_17 : i64
        %c1_i64_18 = arith.constant 1 : i64
        %66 = arith.addi %arg15, %c1_i64_18 : i64
        %67 = arith.minsi %66, %65 : i64
        %68 = arith.muli %3, %arg9 : i64
        %69 = arith.addi %68, %67 : i64
        %70 = m3idx.load %arg2[%69] : memref<?xi32> -> i32
        %71 = arith.extsi %70 : i32 to i64
        %c9216_i64_19 = arith.constant 9216 : i64
        %72 = arith.muli %71, %c9216_i64_19 : i64
        %c1_i64_20 = arith.constant 1 : i64
        %c2_i64 = arith.constant 2 : i64
        %c0_i64_21 = arith.constant 0 : i64
        %73:3 = scf.for %arg19 = %c0_i64_21 to %c2_i64 step %c1_i64_20 iter_args(%arg20 = %splat_8, %arg21 = %arg17, %arg22 = %arg18) -> (tensor<4096xf32>, tensor<4096xi8>, tensor<512xi8>)  : i64 {
          %c1_i64_41 = arith.constant 1 : i64
          %92 = arith.cmpi eq, %arg19, %c1_i64_41 : i64
          %c1_i64_42 = arith.constant 1 : i64
          %93 = arith.addi %arg19, %c1_i64_42 : i64
          %c0_i64_43 = arith.constant 0 : i64
          %94 = arith.select %92, %c0_i64_43, %93 : i64
          %95 = arith.select %92, %72, %arg16 : i64
          %c64_i64_44 = arith.constant 64 : i64
          %96 = arith.muli %94, %c64_i64_44 : i64
          %c64_i64_45 = arith.constant 64 : i64
          %97 = arith.muli %96, %c64_i64_45 : i64
          %98 = arith.addi %95, %97 : i64
          %99 = m3idx.load_tile %arg1[%98] {align = 16 : i32} : memref<?xi8> -> tensor<4096xi8>
          %c8_i64_46 = arith.constant 8 : i64
          %100 = arith.muli %96, %c8_i64_46 : i64
          %c8192_i64_47 = arith.constant 8192 : i64
          %101 = arith.addi %95, %c8192_i64_47 : i64
          %102 = arith.addi %101, %100 : i64
          %103 = m3idx.load_tile %arg1[%102] {align = 16 : i32} : memref<?xi8> -> tensor<512xi8>
          %104 = m3idx.decode_nvfp4 %arg21, %arg22 : tensor<4096xi8>, tensor<512xi8> -> tensor<8192xf8E4M3FN>
          %105 = m3idx.dot_tiles %104, %62, 128 : tensor<8192xf8E4M3FN>, tensor<16384xf8E4M3FN> -> tensor<8192xf32>
          %106 = m3idx.iota : tensor<8192xi64>
          %107 = arith.trunci %106 : tensor<8192xi64> to tensor<8192xi32>
          %c64_i32 = arith.constant 64 : i32
          %splat_48 = tensor.splat %c64_i32 : tensor<8192xi32>
          %108 = arith.divsi %107, %splat_48 : tensor<8192xi32>
          %c64_i32_49 = arith.constant 64 : i32
          %splat_50 = tensor.splat %c64_i32_49 : tensor<8192xi32>
          %109 = arith.remsi %107, %splat_50 : tensor<8192xi32>
          %110 = arith.subi %109, %108 : tensor<8192xi32>
          %c2147483647_i32 = arith.constant 2147483647 : i32
          %111 = arith.trunci %15 : i64 to i32
          %splat_51 = tensor.splat %111 : tensor<8192xi32>
          %112 = arith.cmpi slt, %108, %splat_51 : tensor<8192xi32>
          %splat_52 = tensor.splat %c2147483647_i32 : tensor<8192xi32>
          %113 = arith.select %112, %110, %splat_52 : tensor<8192xi1>, tensor<8192xi32>
          %c64_i64_53 = arith.constant 64 : i64
          %114 = arith.muli %arg19, %c64_i64_53 : i64
          %c128_i64_54 = arith.constant 128 : i64
          %115 = arith.muli %arg15, %c128_i64_54 : i64
          %116 = arith.addi %115, %114 : i64
          %117 = arith.subi %41, %116 : i64
          %118 = arith.trunci %117 : i64 to i32
          %splat_55 = tensor.splat %118 : tensor<8192xi32>
          %119 = arith.cmpi slt, %113, %splat_55 : tensor<8192xi32>
          %120 = arith.select %119, %105, %splat : tensor<8192xi1>, tensor<8192xf32>
          %121 = m3idx.fold_max %120, 8 : tensor<8192xf32> -> tensor<4096xf32>
          %122 = arith.maxnumf %arg20, %121 : tensor<4096xf32>
          scf.yield %122, %99, %103 : tensor<4096xf32>, tensor<4096xi8>, tensor<512xi8>
        }
        %74 = m3idx.reduce_max_groups %73#0, 128 : tensor<4096xf32> -> tensor<128xf32>
        %splat_22 = tensor.splat %41 : tensor<128xi64>
        %75 = arith.addi %42, %splat_22 : tensor<128xi64>
        %splat_23 = tensor.splat %c0_i64 : tensor<128xi64>
        %76 = arith.maxsi %75, %splat_23 : tensor<128xi64>
        %splat_24 = tensor.splat %15 : tensor<128xi64>
        %77 = arith.cmpi slt, %42, %splat_24 : tensor<128xi64>
        %splat_25 = tensor.splat %c0_i64 : tensor<128xi64>
        %78 = arith.select %77, %76, %splat_25 : tensor<128xi1>, tensor<128xi64>
        %c127_i64_26 = arith.constant 127 : i64
        %splat_27 = tensor.splat %c127_i64_26 : tensor<128xi64>
        %79 = arith.addi %78, %splat_27 : tensor<128xi64>
        %c128_i64_28 = arith.constant 128 : i64
        %splat_29 = tensor.splat %c128_i64_28 : tensor<128xi64>
        %80 = arith.divsi %79, %splat_29 : tensor<128xi64>
        %cst_30 = arith.constant 1.000000e+30 : f32
        %81 = arith.cmpi slt, %arg15, %arg13 : i64
        %splat_31 = tensor.splat %cst_30 : tensor<128xf32>
        %82 = arith.select %81, %splat_31, %74 : tensor<128xf32>
        %cst_32 = arith.constant 1.000000e+29 : f32
        %splat_33 = tensor.splat %arg14 : tensor<128xi64>
        %83 = arith.subi %80, %splat_33 : tensor<128xi64>
        %splat_34 = tensor.splat %arg15 : tensor<128xi64>
        %84 = arith.cmpi sge, %splat_34, %83 : tensor<128xi64>
        %splat_35 = tensor.splat %cst_32 : tensor<128xf32>
        %85 = arith.select %84, %splat_35, %82 : tensor<128xi1>, tensor<128xf32>
        %splat_36 = tensor.splat %arg8 : tensor<128xi64>
        %86 = arith.muli %43, %splat_36 : tensor<128xi64>
        %splat_37 = tensor.splat %5 : tensor<128xi64>
        %87 = arith.addi %86, %splat_37 : tensor<128xi64>
        %88 = arith.addi %87, %42 : tensor<128xi64>
        %splat_38 = tensor.splat %arg10 : tensor<128xi64>
        %89 = arith.muli %88, %splat_38 : tensor<128xi64>
        %splat_39 = tensor.splat %arg15 : tensor<128xi64>
        %90 = arith.addi %89, %splat_39 : tensor<128xi64>
        %splat_40 = tensor.splat %arg15 : tensor<128xi64>
        %91 = arith.cmpi slt, %splat_40, %80 : tensor<128xi64>
        m3idx.store_scatter %85, %arg7[%90], %91 : tensor<128xf32>, memref<?xf32>, tensor<128xi64>, tensor<128xi1>
        scf.yield %72, %73#1, %73#2 : i64, tensor<4096xi8>, tensor<512xi8>
      }
    } else {
    }
    return
  }
}
