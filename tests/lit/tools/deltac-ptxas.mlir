// REQUIRES: ptxas
// RUN: rm -rf %t && deltac %s --target=sm_80,sm_90a,sm_100a -o %t --name=lib > /dev/null
// RUN: ptxas -arch=sm_80 -v %t/kernels/g_k64_v128_decode.sm_80.ptx -o /dev/null 2>&1 | FileCheck %s
// RUN: ptxas -arch=sm_90a -v %t/kernels/g_k64_v128_decode.sm_90a.ptx -o /dev/null 2>&1 | FileCheck %s
// RUN: ptxas -arch=sm_100a -v %t/kernels/g_k64_v128_decode.sm_100a.ptx -o /dev/null 2>&1 | FileCheck %s

// CHECK: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

delta.spec @g rule = gated dims = [64x128] io = f16 state = bf16 layout = vk
    gate = linear beta = sigmoid2 chunk = 64 entries = [decode] max_t = 3
