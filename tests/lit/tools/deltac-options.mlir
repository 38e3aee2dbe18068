// The driver's --decode-tuning and --prefill-plan values are range-checked
// with a message naming the option, its value and what is accepted.
// rows-per-thread = 2^63 - 1 once hung in the tiling search; negative
// values were silently clamped; a bad boolean printed an empty message.
// RUN: not deltac %s --target=sm_90a --decode-tuning=rows-per-thread=9223372036854775807 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not deltac %s --target=sm_90a --decode-tuning=rows-per-thread=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not deltac %s --target=sm_90a --decode-tuning=dot-partials=0 2>&1 | FileCheck %s --check-prefix=PARTIALS
// RUN: not deltac %s --target=sm_90a --decode-tuning=dot-partials=257 2>&1 | FileCheck %s --check-prefix=PARTIALS-BIG
// RUN: not deltac %s --target=sm_90a --decode-tuning=unswitch-steps=maybe 2>&1 | FileCheck %s --check-prefix=BOOL
// RUN: not deltac %s --target=sm_90a --decode-tuning=rows-per-thread=99999999999999999999 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// RUN: not deltac %s --target=sm_90a --decode-tuning=variants=all 2>&1 | FileCheck %s --check-prefix=VARIANTS
// RUN: not deltac %s --target=sm_90a --decode-tuning=bogus=1 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not deltac %s --target=sm_90a --prefill-plan=value-tiles=-8 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not deltac %s --target=sm_90a --prefill-plan=value-tiles=x 2>&1 | FileCheck %s --check-prefix=TILE-TEXT
// The edges of the ranges are accepted.
// RUN: deltac %s --target=sm_90a --decode-tuning="rows-per-thread=256 dot-partials=256 unswitch-steps=0" | FileCheck %s --check-prefix=EDGE

// HUGE: error: delta-lower-decode-to-gpu option rows-per-thread = 9223372036854775807 is out of range; accepted: 0 to 256 (0: chosen from K, V and the state type)
// NEGATIVE: error: delta-lower-decode-to-gpu option rows-per-thread = -1 is out of range; accepted: 0 to 256
// PARTIALS: error: delta-lower-decode-to-gpu option dot-partials = 0 is out of range; accepted: 1 to 256
// PARTIALS-BIG: error: delta-lower-decode-to-gpu option dot-partials = 257 is out of range; accepted: 1 to 256
// BOOL: error: --decode-tuning: cannot parse 'unswitch-steps=maybe': options of delta-lower-decode-to-gpu are name=value, integers are decimal and fit 64 bits, booleans are true, false, 1 or 0
// OVERFLOW: error: --decode-tuning: cannot parse 'rows-per-thread=99999999999999999999'
// VARIANTS: error: variants must be staged, bulk, small or empty, got 'all'
// UNKNOWN: error: --decode-tuning: <Pass-Options-Parser>: no such option bogus
// TILE: error: value tile -8 must be a multiple of 8 that divides V = 64
// TILE-TEXT: error: --prefill-plan: cannot parse 'value-tiles=x'
// EDGE: {{[0-9]+}} kernels planned, {{[0-9]+}} generated

delta.spec @opts rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill, decode]
    max_t = 1
