# -*- Python -*-
# lit configuration of deltac's FileCheck tests: one folder per component,
# files named after the pass or feature they test.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "deltac"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.deltac_obj_root, "tests", "lit")
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.use_default_substitutions()
config.substitutions.append(("%deltac_src", config.deltac_src_root))
# The host compiler: generated wrappers must compile (-fsyntax-only).
config.substitutions.append(("%cxx", config.deltac_cxx))

tool_dirs = [os.path.join(config.deltac_obj_root, "bin"), config.llvm_tools_dir]
tools = ["deltac-opt", "deltac", "not", "count", "split-file"]
if config.deltac_ptxas and os.path.exists(config.deltac_ptxas):
    config.available_features.add("ptxas")
    tools.append(ToolSubst("ptxas", config.deltac_ptxas))
llvm_config.add_tool_substitutions(tools, tool_dirs)
