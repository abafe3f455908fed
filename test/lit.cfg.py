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
config.substitutions.append(("%models", os.path.join(config.braid_source_dir, "models")))
config.substitutions.append(("%data", config.braid_data_dir))
