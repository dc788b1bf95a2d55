# lit configuration for m3idx's FileCheck tests. ctest passes the build's bin folder and LLVM 22's
# tools folder as parameters.
import os

import lit.formats

config.name = "m3idx"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(lit_config.params.get("m3idx_bin", "."), "lit")

m3idx_bin = lit_config.params["m3idx_bin"]
llvm_tools = lit_config.params["llvm_tools"]
config.environment["PATH"] = os.pathsep.join([m3idx_bin, llvm_tools, config.environment.get("PATH", "")])
config.environment["M3IDX_NUM_THREADS"] = "1"

# ptxas (CUDA's PTX assembler), when installed, checks that every sm_90 kernel assembles without
# spills; tests that need it say `REQUIRES: ptxas` and are reported unsupported elsewhere.
import shutil

ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
