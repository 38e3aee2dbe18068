// RUN: deltac --help | FileCheck %s --check-prefix=HELP
// RUN: deltac --version | FileCheck %s --check-prefix=VERSION
// RUN: not deltac %t.missing.mlir --target=sm_90a 2>&1 | FileCheck %s --check-prefix=UNREADABLE
// RUN: not deltac %s --target=sm_75 2>&1 | FileCheck %s --check-prefix=BADTARGET
// RUN: not deltac %s --target=sm_80,sm_80 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not deltac %s 2>&1 | FileCheck %s --check-prefix=NOTARGET

// HELP: deltac: generate delta-rule linear-attention kernels from a spec
// HELP: --print-ir
// HELP: --target=<sm_XX[,sm_YY]>
// VERSION: deltac {{[0-9]+\.[0-9]+\.[0-9]+}} (LLVM/MLIR 22.
// UNREADABLE: deltac: error: cannot read '{{.*}}.missing.mlir': No such file or directory
// BADTARGET: deltac: error: unknown target 'sm_75'; supported targets are sm_80, sm_90a, sm_100a
// TWICE: deltac: error: target 'sm_80' is listed twice
// NOTARGET: deltac: error: no target given; pass --target=sm_90a[,sm_80,...]

delta.spec @ok rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
// RUN: not deltac %s --target=sm_90a -o %t.out --name=9lives 2>&1 | FileCheck %s --check-prefix=BADNAME
// BADNAME: deltac: error: library name '9lives' starts with a digit; pass --name=<identifier>
