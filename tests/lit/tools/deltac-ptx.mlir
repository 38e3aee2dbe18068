// RUN: rm -rf %t && deltac %s --target=sm_80,sm_90a,sm_100a -o %t --name=ptx > /dev/null
// RUN: FileCheck %s --check-prefix=VK < %t/kernels/vk_k128_v128_decode.sm_80.ptx
// RUN: FileCheck %s --check-prefix=VK < %t/kernels/vk_k128_v128_decode.sm_90a.ptx
// RUN: FileCheck %s --check-prefix=VK100 < %t/kernels/vk_k128_v128_decode.sm_100a.ptx
// RUN: FileCheck %s --check-prefix=KV < %t/kernels/kv_k128_v128_decode.sm_90a.ptx

// Decode PTX moves the state with 16-byte global accesses (the 16-byte
// alignment on the loads keeps NVPTX from splitting them).
// VK: .target sm_{{80|90a}}
// VK: .entry vk_k128_v128_decode(
// VK: ld.global.v4.b32
// VK: shfl.sync.bfly.b32
// VK: st.global.v4.b32
// VK100: .target sm_100a
// VK100: ld.global.{{v4.b32|v2.b64}}
// VK100: st.global.{{v4.b32|v2.b64}}
// KV: ld.global.v4.b32
// KV: bar.sync
// KV: st.global.v4.b32

delta.spec @vk rule = gated dims = [128x128] io = bf16 state = f32 layout = vk
    gate = log beta = given l2norm chunk = 64 entries = [decode] max_t = 2
delta.spec @kv rule = gated dims = [128x128] io = bf16 state = f32 layout = kv
    gate = log beta = given l2norm chunk = 64 entries = [decode] max_t = 2
