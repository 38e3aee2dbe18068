// RUN: split-file %s %t
// Library names (--name, else the spec file's stem) are checked before
// anything is read or written: each run leaves no output folder behind.
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=class 2>&1 | FileCheck %s --check-prefix=KEYWORD
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=deltac_runtime 2>&1 | FileCheck %s --check-prefix=RUNTIME
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=Deltac_Checks 2>&1 | FileCheck %s --check-prefix=GUARD
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=lambda 2>&1 | FileCheck %s --check-prefix=PYTHON
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=a__b 2>&1 | FileCheck %s --check-prefix=RESERVED
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name= 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --name=a-b 2>&1 | FileCheck %s --check-prefix=DASH
// RUN: not deltac %t/delete.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=STEM
// RUN: not ls %t/out
// A spec name that is no identifier stops at the verifier, with file:line:col
// (it once aborted in the NVPTX printer, rc 134); `class` once wrote a
// library that g++ rejects, rc 0.
// RUN: not deltac %t/spaced.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=SPACED
// RUN: not deltac %t/keyword.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=SPECKEYWORD
// RUN: not ls %t/out
// --runtime-dir is a relative path the CMakeLists and the Python module can
// hold: anything else is refused before anything is written.
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --runtime-dir=/abs/runtime 2>&1 | FileCheck %s --check-prefix=RTABS
// RUN: not deltac %t/ok.mlir --target=sm_90a -o %t/out --runtime-dir='../my runtime' 2>&1 | FileCheck %s --check-prefix=RTSPACE
// RUN: not ls %t/out
// Two libraries sharing one runtime folder (as generated/ does): neither
// holds a copy, and each finds it through its CMakeLists and Python module.
// RUN: deltac %t/ok.mlir --target=sm_80 -o %t/shared/a --name=a --runtime-dir=../runtime | FileCheck %s --check-prefix=SHARED
// RUN: deltac %t/ok.mlir --target=sm_80 -o %t/shared/b --name=b --runtime-dir=../runtime
// RUN: ls %t/shared/runtime/deltac_runtime.cpp %t/shared/runtime/deltac_torch.py %t/shared/runtime/deltac_ops.py
// RUN: not ls %t/shared/a/deltac_runtime.cpp
// RUN: FileCheck %s --check-prefix=SHAREDCMAKE < %t/shared/b/CMakeLists.txt
// RUN: FileCheck %s --check-prefix=SHAREDPY < %t/shared/b/b.py
// The runtime's own library names stay valid names (tests/gpu builds them).
// RUN: deltac %t/ok.mlir --target=sm_80 -o %t/lib --name=deltac_test_decode | FileCheck %s --check-prefix=OK

// KEYWORD: deltac: error: library name 'class' is a C or C++ keyword or a name the generated code uses (std, deltac, deltac_rt, errno, NULL, EOF); pass --name=<identifier>
// RUNTIME: deltac: error: library name 'deltac_runtime' is the name of a runtime file the library holds (deltac_runtime.h); pass --name=<identifier>
// GUARD: deltac: error: library name 'Deltac_Checks' is the name of a runtime file the library holds (deltac_checks.h)
// PYTHON: deltac: error: library name 'lambda' is a Python keyword (it names the library's Python module)
// RESERVED: deltac: error: library name 'a__b' is reserved in C and C++
// EMPTY: deltac: error: library name '' is empty
// DASH: deltac: error: library name 'a-b' holds '-'; it must be a C identifier
// STEM: deltac: error: library name 'delete' is a C or C++ keyword
// SPACED: spaced.mlir:1:1: error: 'delta.spec' op name 'a b-c' holds ' '; it must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)
// SPECKEYWORD: keyword.mlir:1:1: error: 'delta.spec' op name 'class' is a C or C++ keyword
// OK: deltac: wrote library 'deltac_test_decode'
// RTABS: deltac: error: the runtime folder '/abs/runtime' must be a relative path from the library's folder
// RTSPACE: deltac: error: the runtime folder '../my runtime' must be a relative path
// SHARED: deltac: wrote library 'a' to {{.*}}shared/a ({{.*}}runtime in {{.*}}shared/a/../runtime)
// SHAREDCMAKE: set(b_RUNTIME_DIR ${_dir}/../runtime)
// SHAREDCMAKE: target_include_directories(${lib} PUBLIC ${_dir} ${_runtime})
// SHAREDPY: "../runtime"))
// SHAREDPY: from deltac_torch import Library

//--- ok.mlir
delta.spec @ok rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
//--- delete.mlir
delta.spec @ok rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
//--- spaced.mlir
delta.spec @"a b-c" rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
//--- keyword.mlir
delta.spec @class rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
