# lit configuration: FileCheck tests of the dialects, passes and tools.
import os

import lit.formats

config.name = "Braid"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.braid_binary_dir, "test")

# Tools under test first, then LLVM's FileCheck, not and count.
config.environment["PATH"] = os.pathsep.join(
    [config.braid_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
# Multi-rank tests run under Open MPI: one kernel thread per rank, as root
# where CI runs as root, and more ranks than cores (--oversubscribe), each
# job with a session directory of its own (test/mpirun.sh).
import shutil

for var in ("HOME", "TMPDIR", "USER"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
# OpenBLAS chooses its sgemm kernels by the CPU, and the kernels of
# different CPUs (AVX2, AVX-512) sum in different orders, so a test holding
# recorded bits (e2e/losses-8a91552.test) would pass on one kind of machine
# only. The AVX2 kernels run on every x86-64 machine the suite runs on:
# every test asks for them, unless the caller chose.
import platform

if platform.machine() in ("x86_64", "AMD64"):
    config.environment["OPENBLAS_CORETYPE"] = os.environ.get(
        "OPENBLAS_CORETYPE", "Haswell")
if config.braid_have_mpi == "1" and shutil.which("mpirun"):
    config.available_features.add("mpi")
config.substitutions.append(
    ("%mpirun", os.path.join(config.braid_source_dir, "test", "mpirun.sh")
     + " --oversubscribe --bind-to none -x BRAID_NUM_THREADS=1 -np")
)
config.substitutions.append(("%models", os.path.join(config.braid_source_dir, "models")))
config.substitutions.append(("%data", config.braid_data_dir))
