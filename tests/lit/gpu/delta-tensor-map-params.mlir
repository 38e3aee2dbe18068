// RUN: deltac-opt %s --delta-tensor-map-params | FileCheck %s

// A kernel's generic pointer arguments (tensor maps) become 128-byte
// grid-constant parameters aligned to 64; global pointers stay as they are,
// and so does a function that is not a kernel.

// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>,
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.align = 64 : i32, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %{{.*}}: i32)
// CHECK-SAME: nvvm.kernel
llvm.func @kernel(%out: !llvm.ptr<1>, %map: !llvm.ptr, %n: i32) attributes {nvvm.kernel} {
  %a = llvm.ptrtoint %map : !llvm.ptr to i64
  llvm.store %a, %out : i64, !llvm.ptr<1>
  llvm.return
}

// CHECK-LABEL: llvm.func @helper(
// CHECK-SAME: %{{.*}}: !llvm.ptr)
// CHECK-NOT: grid_constant
llvm.func @helper(%p: !llvm.ptr) {
  llvm.return
}
