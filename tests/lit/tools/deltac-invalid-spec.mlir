// RUN: split-file %s %t
// RUN: not deltac %t/bad-dim.mlir --target=sm_90a 2>&1 | FileCheck %s --check-prefix=DIM
// RUN: not deltac %t/not-a-spec.mlir --target=sm_90a 2>&1 | FileCheck %s --check-prefix=NOTSPEC
// RUN: not deltac %t/empty.mlir --target=sm_90a 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not deltac %t/syntax.mlir --target=sm_90a 2>&1 | FileCheck %s --check-prefix=SYNTAX

// Errors in a spec file carry file:line:col and exit non-zero.
// DIM: bad-dim.mlir:2:1: error: 'delta.spec' op key dim K = 72 must be a multiple of 16 in [16, 256]
// DIM-NOT: see current operation
// NOTSPEC: not-a-spec.mlir:1:1: error: a spec file holds only delta.spec ops; found 'func.func'
// EMPTY: empty.mlir:0:0: error: the spec file holds no delta.spec
// SYNTAX: syntax.mlir:1:125: error: custom op 'delta.spec' unknown entry point 'verify'; expected prefill or decode

//--- bad-dim.mlir
// A K that is not a multiple of 16.
delta.spec @bad rule = gated dims = [72x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
//--- not-a-spec.mlir
func.func @f() { return }
//--- empty.mlir
//--- syntax.mlir
delta.spec @s rule = gated dims = [128x128] io = bf16 state = f32 layout = vk gate = log beta = given chunk = 64 entries = [verify]
