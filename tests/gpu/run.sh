#!/usr/bin/env bash
# tests/gpu/run.sh build|test|test-sanitize|test-python|test-compile|test-wheel|test-fla-backend|test-fla-peer|test-cp|test-all|bench|bench-cp|bench-decode|all|variants|prefill|bench-prefill|profile-prefill|profile-decode|cold-start|prefill-variants - GPU tests
# and benchmarks (prefill / bench-prefill: only the prefill test or benchmark;
# extra arguments go to it, e.g. `bench-prefill --shapes t32k_h16`).
#
# Runs on the GPU machine from the repository root. Needs the CUDA toolkit,
# CMake and Ninja, not LLVM/MLIR: it builds the checked-in generated/
# libraries. `bench` also needs torch and triton, and flash-linear-attention
# on PYTHONPATH (FLA_DIR, default .fla/ in the checkout) for the anchor.
# Details go to $OUT (or ./gpu-out), the short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}

# The device copies the tree and what `carry` names, 64 MiB in all, and the
# tracked tree takes most of it: FLA's source and the A/B variants travel
# compressed (.fla.tar.xz holds .fla/'s contents, .variants.tar.xz the
# folder .variants/) and are unpacked here, again whenever the archive
# changed (a warm machine keeps the last call's folder).
unpack_carried() { # unpack_carried ARCHIVE FOLDER STRIP (leading path parts)
  [ -f "$1" ] || return 0
  local sum
  sum=$(md5sum < "$1")
  [ -d "$2" ] && [ "$(cat "$2/.unpacked" 2>/dev/null)" = "$sum" ] && return 0
  rm -rf "$2" && mkdir -p "$2" && tar -xJf "$1" -C "$2" --strip-components="$3" &&
    echo "$sum" > "$2/.unpacked"
}
unpack_carried .fla.tar.xz .fla 0
unpack_carried .variants.tar.xz .variants 1

environment() {
  local runtime="unknown"
  if grep -qi gvisor /proc/version 2>/dev/null || dmesg 2>/dev/null | grep -qi gvisor; then
    runtime="gVisor"
  elif uname -r | grep -q -- "-fc-" || dmesg 2>/dev/null | grep -qi firecracker; then
    runtime="Firecracker"
  fi
  echo "runtime: $runtime; $(uname -r)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  echo "$runtime" > "$OUT/runtime.txt"
}

# build [TARGET...]: those targets, or everything. A part names what it
# runs: generated/gdn alone is about 2000 objects (most of a full build's
# minutes on the device), prefill_test's library builds in about 15 s.
build() {
  cmake -S tests/gpu -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 ||
    { cat "$OUT/configure.log"; return 1; }
  local targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  local start=$SECONDS
  cmake --build "$BUILD" -j 16 "${targets[@]}" > "$OUT/build.log" 2>&1 ||
    { tail -50 "$OUT/build.log"; return 1; }
  echo "build: ok (${*:-everything}, $((SECONDS - start)) s)"
}

# Forced forms: DELTAC_PREFILL_FORCE=<form>[,key=value...] (docs/host-api.md).
# force FORM TEST ARGS...: TEST under that request.
force() { DELTAC_PREFILL_FORCE="$1" "${@:2}"; }

# sanitize TOOL TEST LOG [NAME=VALUE...]: one compute-sanitizer run of
# TEST --quick in that environment, its summary line; sets status=1 on an
# error or any hazard (status is the caller's local).
sanitize() {
  env "${@:4}" compute-sanitizer --tool "$1" --error-exitcode 3 "$BUILD/$2" --quick \
    > "$OUT/$3.log" 2>&1 || status=1
  local summary
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$3.log" | tail -1)
  echo "$3: $summary"
  # racecheck exits 0 when it reports hazards: any but 0 fails the run.
  echo "$summary" | grep -qE 'SUMMARY: 0 (errors|hazards)' || status=1
}

run_tests() {
  local status=0
  "$BUILD/decode_test" > "$OUT/decode_test.log" 2>&1 || status=1
  tail -n 30 "$OUT/decode_test.log" | grep -E "^(FAIL|==|  FAILED)" || true
  "$BUILD/prefill_test" > "$OUT/prefill_test.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test.log" || tail -20 "$OUT/prefill_test.log"
  "$BUILD/capture_test" > "$OUT/capture_test.log" 2>&1 || status=1
  # A test that stops before its summary (a CUDA error) shows its last lines.
  grep -E "^(FAIL|==)" "$OUT/capture_test.log" || tail -3 "$OUT/capture_test.log"
  if [ "$(cat "$OUT/runtime.txt")" != "gVisor" ] && command -v compute-sanitizer > /dev/null; then
    sanitize memcheck decode_test memcheck
    sanitize memcheck prefill_test memcheck_prefill
    # The overlapped launch's flags and queue (the tool may serialise the
    # two kernels: the launch must then still finish, in order).
    sanitize memcheck prefill_test memcheck_prefill_overlap DELTAC_PREFILL_FORCE=overlap
    # The same with the shared launch (recur beside a queue block per SM).
    sanitize memcheck prefill_test memcheck_prefill_shared DELTAC_PREFILL_FORCE=overlap_shared
    # And its recur in the ordinary launch (test-sanitize racechecks it).
    sanitize memcheck prefill_test memcheck_prefill_shared_recur DELTAC_PREFILL_FORCE=shared_recur
    # Context parallelism forced onto every case that has it (varlen
    # batches split 8 ways, pools, short sequences with empty segments).
    sanitize memcheck prefill_test memcheck_prefill_cp DELTAC_PREFILL_FORCE=cp,segments=8
  else
    echo "memcheck: skipped (compute-sanitizer does not run on this runtime)"
  fi
  return $status
}

# racecheck and synccheck (test-sanitize; about a minute each, so apart
# from test's memchecks: together they passed the device's 10 minutes).
run_sanitize_tests() {
  local status=0
  if [ "$(cat "$OUT/runtime.txt")" != "gVisor" ] && command -v compute-sanitizer > /dev/null; then
    # The recur kernel's warp roles hand shared memory over through named
    # barriers: racecheck finds a missing hand-over, synccheck a misused one.
    sanitize racecheck prefill_test racecheck_prefill
    sanitize synccheck prefill_test synccheck_prefill
    # The shared launch's recur in the ordinary launch: its warp roles at
    # 168 registers hand over shared memory as the other recur's do.
    sanitize racecheck prefill_test racecheck_prefill_shared_recur DELTAC_PREFILL_FORCE=shared_recur
    sanitize racecheck prefill_test racecheck_prefill_cp DELTAC_PREFILL_FORCE=cp,segments=8
    # The raw q/k form (never overlapped) as dispatched: its TMA copies and
    # the W form (W's stores over A_w; the chain's wait for it).
    local tool
    for tool in racecheck synccheck; do
      sanitize $tool prefill_test ${tool}_prefill_raw DELTAC_PREFILL_FORCE=raw_qk,tile=64,tma=1
    done
    # And by cp.async, without W: those threads' arrivals on the ring's
    # mbarriers.
    sanitize racecheck prefill_test racecheck_prefill_raw_cp_async \
      DELTAC_PREFILL_FORCE=raw_qk_w,tile=64,tma=0
  else
    echo "racecheck, synccheck: skipped (compute-sanitizer does not run on this runtime)"
  fi
  return $status
}

# The forced forms: every prefill case again through each kernel form the
# dispatch may not pick on this GPU and call (the sm_80 PTX, ring depths,
# V tile 64, the overlapped and shared launches, the raw q/k form, TMA on
# and off, no PDL), and decode's sm_80 PTX. Its own mode (test-forced):
# together with the default tests it outgrew the device's 10 minutes a
# command.
run_forced_tests() {
  local status=0
  DELTAC_FORCE_TARGET=sm_80 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_sm80.log" 2>&1 || status=1
  grep -E "^==" "$OUT/prefill_test_sm80.log" | sed 's/^/sm_80 PTX: /'
  # chunks from the sm_80 PTX beside recur from the device's own: refused
  # (a process of its own: it needs kernels not yet loaded).
  "$BUILD/prefill_test" --mismatch > "$OUT/prefill_test_mismatch.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_mismatch.log"
  # The recur ring with two stages (A100's shared memory), forced here.
  force dispatch,stages=2 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_2stage.log" 2>&1 || status=1
  grep -E "^==" "$OUT/prefill_test_2stage.log" | sed 's/^/recur 2 stages: /'
  # And one (where two do not fit a block: V tile 64 on an A100).
  force dispatch,stages=1 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_1stage.log" 2>&1 || status=1
  grep -E "^==" "$OUT/prefill_test_1stage.log" | sed 's/^/recur 1 stage: /'
  # Every case through the V tile 64 recur (the transposed form on sm_90a);
  # a library without that tile (k256) refuses the call, and prefill_test
  # asserts which recur ran.
  force dispatch,tile=64 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_v64.log" 2>&1 || status=1
  grep -E "^==" "$OUT/prefill_test_v64.log" | sed 's/^/V tile 64: /'
  # Every case through the overlapped launch where the code has it (sm_90a:
  # chunks' queue form beside recur, PrefillOverlap.cpp).
  # Every case through context parallelism where the library has it (cp:
  # the dispatch's segments, else 2; then 8, more segments than short
  # sequences have chunks), refused where it does not.
  force cp "$BUILD/prefill_test" --quick > "$OUT/prefill_test_cp.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_cp.log" | sed 's/^/context-parallel: /'
  force cp,segments=8 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_cp8.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_cp8.log" | sed 's/^/context-parallel, 8 segments: /'
  force overlap "$BUILD/prefill_test" --quick > "$OUT/prefill_test_overlap.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_overlap.log" | sed 's/^/overlapped: /'
  # The shared launch's recur in the ordinary launch (beside chunks; the
  # default where recur's grid is under a wave, useSharedRecur), forced
  # (every case whose library has it, whatever the grid; prefill_test
  # asserts from last_launches that it ran), and at 1 stage; and the
  # ordinary launch with the other recur (`ordinary`).
  force shared_recur "$BUILD/prefill_test" \
    > "$OUT/prefill_test_shared_recur.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_shared_recur.log" | sed 's/^/shared recur, ordinary launch: /'
  force shared_recur,stages=1 \
    "$BUILD/prefill_test" --quick > "$OUT/prefill_test_shared_recur_1.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_shared_recur_1.log" |
    sed 's/^/shared recur, ordinary launch, 1 stage: /'
  force ordinary "$BUILD/prefill_test" --quick \
    > "$OUT/prefill_test_no_shared_recur.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/prefill_test_no_shared_recur.log" |
    sed 's/^/ordinary recur, ordinary launch: /'
  # The shared overlapped launch (recur beside one queue block on each SM
  # it takes, `_recur_shared`; the default where chooseSharedOverlapVariant
  # says), wherever the code has the overlapped launch, at 2 and 1 ring
  # stages.
  for st in 2 1; do
    force overlap_shared,stages=$st \
      "$BUILD/prefill_test" --quick > "$OUT/prefill_test_shared_$st.log" 2>&1 || status=1
    grep -E "^(FAIL|==)" "$OUT/prefill_test_shared_$st.log" | sed "s/^/shared overlap, $st stage(s): /"
  done
  # Every case through the transposed recur that reads raw q and k (chunks
  # writes no Qg and Kd; sm_90a, taken where recur's grid fills a wave),
  # with 3, 2 and 1 ring stages: as dispatched (q, k and v by TMA tensor
  # copies, required by tma=1 so that a call whose maps cannot be encoded
  # is refused instead of falling back; W computed by recur from A_w), and
  # with either or both of those turned off (tma=0; raw_qk_w: chunks
  # writes W).
  local form st log
  for form in raw_qk,tile=64,tma=1 raw_qk,tile=64,tma=0 raw_qk_w,tile=64,tma=1 \
              raw_qk_w,tile=64,tma=0; do
    for st in 3 2 1; do
      # Two depths per option (the ring's deepest and shallowest).
      [ "$form" != raw_qk,tile=64,tma=1 ] && [ "$st" = 2 ] && continue
      log="$OUT/prefill_test_raw_$(echo "$form" | tr -c 'A-Za-z0-9\n' _)_$st.log"
      force "$form,stages=$st" "$BUILD/prefill_test" --quick > "$log" 2>&1 || status=1
      grep -E "^(FAIL|==)" "$log" | sed "s/^/$form, $st stage(s): /"
    done
  done
  # The warpgroup chunks (the ordinary launch) with q, k and v by TMA
  # tensor copies (required) and by cp.async.
  for form in 1 0; do
    log="$OUT/prefill_test_tma$form.log"
    force ordinary,tma=$form "$BUILD/prefill_test" --quick > "$log" 2>&1 || status=1
    grep -E "^(FAIL|==)" "$log" | sed "s/^/ordinary,tma=$form: /"
  done
  # recur launched after chunks as usual (not as a programmatic dependent).
  DELTAC_PDL=0 "$BUILD/prefill_test" --quick > "$OUT/prefill_test_nopdl.log" 2>&1 || status=1
  grep -E "^==" "$OUT/prefill_test_nopdl.log" | sed 's/^/no PDL: /'
  # The sm_80 PTX, forced onto this GPU (the driver compiles it).
  DELTAC_FORCE_TARGET=sm_80 "$BUILD/decode_test" --quick > "$OUT/decode_test_sm80.log" 2>&1 || status=1
  grep -E "^==" "$OUT/decode_test_sm80.log" | sed 's/^/sm_80 PTX: /'
  return $status
}

# The Python module (needs torch, and FLA for the comparisons; the slowest
# part: FLA compiles each configuration it is compared in). The sweeps over
# the example library's specializations (tests/gpu/fla_sweeps.py) run in a
# process of their own beside the rest, on the same GPU.
run_python_tests() {
  local status=0 part
  for part in sweeps main; do
    DELTAC_PY_PART=$part PYTHONPATH="${PYTHONPATH:-}:${FLA_DIR:-$PWD/.fla}" FLA_FLASH_QLA=0 \
      python3 tests/gpu/test_python.py "$BUILD" "$OUT" > "$OUT/python_test_$part.log" 2>&1 &
  done
  for part in sweeps main; do
    wait -n || status=1
  done
  for part in sweeps main; do
    grep -E "^(FAIL|==|PASS cold)" "$OUT/python_test_$part.log" || tail -5 "$OUT/python_test_$part.log"
  done
  return $status
}

# The torch custom ops (tests/gpu/test_compile.py): torch.compile with
# fullgraph and dynamic shapes, CUDA graphs through mode="reduce-overhead".
run_compile_tests() {
  local status=0
  python3 tests/gpu/test_compile.py "$BUILD" "$OUT" > "$OUT/compile_test.log" 2>&1 || status=1
  grep -E "^(FAIL|==|torch )" "$OUT/compile_test.log" || tail -20 "$OUT/compile_test.log"
  return $status
}

# The example library's wheel on the GPU: built here with the standard
# tools (pip wheel --no-build-isolation, scikit-build-core; the machine has
# no network, so scikit-build-core comes from .wheels/ in the checkout,
# carried: `pip download scikit-build-core -d .wheels`), installed into a
# fresh folder outside the checkout, and the torch.compile tests and the
# Python module's main tests run from there against the installed package
# (tests/gpu/installed.py checks it is the wheel's copy that runs). FLA's
# comparisons are left out unless FLA_DIR is given (the errors against
# fp64 keep their bounds). CI checks the wheel's contents (tests/wheel).
run_wheel_tests() {
  local W=${WHEEL_DIR:-/tmp/deltac-wheel} root=$PWD status=0
  rm -rf "$W" && mkdir -p "$W/src" "$W/site"
  cp -r generated/gdn generated/runtime "$W/src/"
  local log="$OUT/wheel_build.log"
  python3 -c "import scikit_build_core" 2> /dev/null ||
    python3 -m pip install -q --no-index --find-links .wheels scikit-build-core > "$log" 2>&1 ||
    { echo "wheel: scikit-build-core missing (pip download it into .wheels/)"; tail -5 "$log"; return 1; }
  python3 -m pip wheel --no-build-isolation --no-deps --no-index "$W/src/gdn" -w "$W/dist" \
    >> "$log" 2>&1 || { echo "wheel: build failed"; tail -30 "$log"; return 1; }
  python3 -m pip install -q --no-index --no-deps --target "$W/site" "$W"/dist/deltac_gdn-*.whl \
    >> "$log" 2>&1 || { echo "wheel: install failed"; tail -10 "$log"; return 1; }
  echo "wheel: $(cd "$W/dist" && ls deltac_gdn-*.whl) ($(du -h "$W"/dist/*.whl | cut -f1)) in $W/site"
  local fla=""
  [ -n "${FLA_DIR:-}" ] && fla=$FLA_DIR
  (cd "$W" && DELTAC_GDN_PACKAGE=deltac_gdn PYTHONPATH="$W/site" \
    python3 "$root/tests/gpu/test_compile.py" "$root/$BUILD" "$OUT") \
    > "$OUT/wheel_compile_test.log" 2>&1 || status=1
  grep -E "^(FAIL|==|deltac_gdn)" "$OUT/wheel_compile_test.log" || tail -20 "$OUT/wheel_compile_test.log"
  (cd "$W" && DELTAC_GDN_PACKAGE=deltac_gdn DELTAC_PY_PART=main PYTHONPATH="$W/site:$fla" \
    FLA_FLASH_QLA=0 DELTAC_TEST_NO_FLA=$([ -n "$fla" ] && echo 0 || echo 1) \
    python3 "$root/tests/gpu/test_python.py" "$root/$BUILD" "$OUT") \
    > "$OUT/wheel_python_test.log" 2>&1 || status=1
  grep -E "^(FAIL|==|PASS cold|deltac_gdn)" "$OUT/wheel_python_test.log" ||
    tail -20 "$OUT/wheel_python_test.log"
  return $status
}

# deltac as FLA's backend (tests/gpu/test_fla_backend.py): FLA's
# GatedDeltaNet and KDA layers with and without it; needs FLA (FLA_DIR,
# default .fla/ in the checkout).
run_fla_backend_tests() {
  local status=0
  PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0 \
    python3 tests/gpu/test_fla_backend.py "$BUILD" "$OUT" > "$OUT/fla_backend_test.log" 2>&1 ||
    status=1
  grep -E "^(FAIL|==|FLA )" "$OUT/fla_backend_test.log" || tail -20 "$OUT/fla_backend_test.log"
  return $status
}

# FLA's own forward tests through deltac (tests/gpu/fla_peer.py): the
# pinned FLA's tests/ops files from FLA_DIR/tests/ops (the carried FLA
# folder holds them beside fla/), einops from a wheel there if missing.
run_fla_peer_tests() {
  local fla=${FLA_DIR:-$PWD/.fla} status=0
  python3 -c "import einops" 2> /dev/null ||
    python3 -m pip install -q --no-index "$fla"/einops-*.whl > "$OUT/einops.log" 2>&1
  PYTHONPATH="$fla:${PYTHONPATH:-}" FLA_FLASH_QLA=0 python3 tests/gpu/fla_peer.py \
    --fla-tests "$fla/tests/ops" --lib "$BUILD/gdn/libgdn.so" --out "$OUT" "$@" \
    > "$OUT/fla_peer.log" 2>&1 || status=1
  grep -E "^(FAIL|== )" "$OUT/fla_peer.log" || tail -20 "$OUT/fla_peer.log"
  # The chunk-32 KDA specs against fp64 on their own (FLA's o ratio squares
  # f16 values, which underflow: its f16 case reads 0).
  python3 tests/gpu/kda_chunk32_check.py "$BUILD/gdn/libgdn.so" > "$OUT/kda_chunk32.log" 2>&1 ||
    status=1
  grep -E "^(FAIL|== )" "$OUT/kda_chunk32.log" || tail -5 "$OUT/kda_chunk32.log"
  return $status
}

run_bench_decode() {
  export PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0
  python3 tests/bench/bench_decode.py --lib "$BUILD/deltac_test_decode/libdeltac_test_decode.so" \
    --gdn-lib "$BUILD/gdn/libgdn.so" --out "$OUT"
}

run_bench() {
  run_bench_decode
  python3 tests/bench/bench_prefill.py --lib "$BUILD/deltac_test_prefill/libdeltac_test_prefill.so" \
    --out "$OUT"
}

# Nsight Compute on the prefill kernels (Firecracker machines only): one
# profiled call per shape (SHAPES, default the T = 32K and varlen shapes),
# the details page and the per-instruction (SASS) stall samples under $OUT
# (tests/bench/ncu_stalls.py sums them up), a few headline metrics and the
# stall reasons printed.
run_profile_prefill() {
  if [ "$(cat "$OUT/runtime.txt")" = "gVisor" ] || ! command -v ncu > /dev/null; then
    echo "ncu: skipped (does not run on this runtime)"; return 0
  fi
  # KERNELS: a regex of the kernels to profile; LIB: the library (a
  # variant's, e.g. .variants/build/<name>/libdeltac_test_prefill.so).
  local shape kernels=${KERNELS:-prefill_(chunks|recur)}
  for shape in ${SHAPES:-t32k_h16 varlen16k_h16_hv32}; do
    ncu --target-processes all -k "regex:$kernels" -c 2 --set full -f \
      -o "$OUT/ncu_$shape" python3 tests/bench/bench_prefill.py \
      --lib "${LIB:-$BUILD/deltac_test_prefill/libdeltac_test_prefill.so}" --no-fla --shapes "$shape" \
      > "$OUT/ncu_$shape.log" 2>&1 || { tail -20 "$OUT/ncu_$shape.log"; return 1; }
    ncu --import "$OUT/ncu_$shape.ncu-rep" --page details > "$OUT/ncu_$shape.txt" 2>&1
    ncu --import "$OUT/ncu_$shape.ncu-rep" --page source --csv --print-source sass \
      > "$OUT/ncu_${shape}_sass.csv" 2>&1
    python3 tests/bench/ncu_stalls.py "$OUT/ncu_${shape}_sass.csv" --top 12 \
      > "$OUT/ncu_${shape}_stalls.txt" 2>&1
    echo "== $shape"
    grep -E "^  [a-z_0-9]+prefill_|^    (Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Hit Rate|Registers Per Thread|Achieved Occupancy|Issue Slots Busy|No Eligible)  " \
      "$OUT/ncu_$shape.txt"
    grep -A1 "^== " "$OUT/ncu_${shape}_stalls.txt" # each kernel's stall reasons
  done
}

# Nsight Compute on decode (Firecracker machines only): deltac's vk and kv
# kernels beside torch's copy of the same state bytes (issue 32's floor at
# B = 1), the last of four eager calls of each (an NVTX range), per shape
# of SHAPES ("TxB" words, default 1x1); the details pages and the SASS
# stall summaries under $OUT, a few headline metrics printed.
run_profile_decode() {
  if [ "$(cat "$OUT/runtime.txt")" = "gVisor" ] || ! command -v ncu > /dev/null; then
    echo "ncu: skipped (does not run on this runtime)"; return 0
  fi
  local layout shape name tmp
  tmp=$(mktemp -d)
  # Two files come back (the device returns few): every profile's details
  # page in ncu_decode.txt, its stall summary in ncu_decode_stalls.txt.
  : > "$OUT/ncu_decode.txt"; : > "$OUT/ncu_decode_stalls.txt"
  for shape in ${SHAPES:-1x1}; do
    for layout in vk kv; do
      name="decode_${layout}_$shape"
      ncu --target-processes all --nvtx --nvtx-include 'profile/' --set full -f \
        -o "$tmp/$name" python3 tests/bench/profile_decode.py \
        --lib "$BUILD/deltac_test_decode/libdeltac_test_decode.so" --layout "$layout" \
        --tokens "${shape%x*}" --batch "${shape#*x}" \
        > "$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; return 1; }
      { echo "== $name"; ncu --import "$tmp/$name.ncu-rep" --page details; } \
        > "$tmp/$name.txt" 2>&1
      cat "$tmp/$name.txt" >> "$OUT/ncu_decode.txt"
      ncu --import "$tmp/$name.ncu-rep" --page source --csv --print-source sass \
        > "$tmp/${name}_sass.csv" 2>&1
      { echo "== $name"; python3 tests/bench/ncu_stalls.py "$tmp/${name}_sass.csv" --top 12; } \
        >> "$OUT/ncu_decode_stalls.txt" 2>&1
      echo "== $name"
      grep -E "^  [a-zA-Z_0-9<>:, ]+\\(|^    (Duration|DRAM Throughput|Registers Per Thread|Achieved Occupancy|Issue Slots Busy|No Eligible|Grid Size)  " \
        "$tmp/$name.txt"
    done
  done
  rm -rf "$tmp"
}

# build_variant DIR NAME: configures and builds the generated library
# DIR/NAME into DIR/build/NAME, its log in $OUT/variant_NAME.log.
# A copy of a checked-in library (git archive) names its runtime ../runtime;
# the variant's own runtime/ folder, where there is one, stands in for it.
build_variant() {
  local runtime=() lib
  # The library's name, from its CMakeLists (<lib>_RUNTIME_DIR).
  lib=$(sed -n 's/^if(NOT DEFINED \(.*\)_RUNTIME_DIR)$/\1/p' "$1/$2/CMakeLists.txt")
  [ -d "$1/$2/runtime" ] && runtime=("-D${lib}_RUNTIME_DIR=$1/$2/runtime")
  cmake -S "$1/$2" -B "$1/build/$2" -G Ninja -DCMAKE_BUILD_TYPE=Release "${runtime[@]}" \
    > "$OUT/variant_$2.log" 2>&1 &&
    cmake --build "$1/build/$2" -j 16 >> "$OUT/variant_$2.log" 2>&1
}

# Tuning experiments: VARIANTS (default .variants/) holds libraries made by
# `deltac --decode-tuning=... --name=<name> -o VARIANTS/<name>` and a LIST
# of "name options" lines; each is built and timed against the others.
run_variants() {
  local dir=${VARIANTS:-$PWD/.variants}
  while read -r name _; do
    build_variant "$dir" "$name" || { echo "variant $name: build failed"; return 1; }
  done < "$dir/LIST"
  PYTHONPATH="${PYTHONPATH:-}:${FLA_DIR:-$PWD/.fla}" python3 tests/bench/bench_variants.py "$dir" |
    tee "$OUT/variants.txt"
}

# Prefill A/B: every library under VARIANTS (default .variants/), each made
# by `deltac tests/gpu/prefill_matrix.mlir --spec=gkv,kkv --target=sm_90a
# -o VARIANTS/<name> --name deltac_test_prefill` with one change (the
# benchmark's two specs only, so the builds take less device time), built
# in parallel and timed one after the other by bench_prefill.py --no-fla
# --profile (extra arguments go to it, e.g. `--rule kda --shapes t32k_h16`):
# one line per kernel and call, and deltac's error on the accuracy case
# (as dispatched, then through the tile-64 recur in both forms).
# VARIANT_ENVS (`;`-separated, e.g. "X=0;DELTAC_PREFILL_FORCE=raw_qk") times
# each library once per environment setting (a forced dispatch).
run_prefill_variants() {
  local dir=${VARIANTS:-$PWD/.variants} v e names envs
  names=$(find "$dir" -mindepth 1 -maxdepth 1 -type d ! -name build -printf '%f\n' | sort)
  IFS=';' read -r -a envs <<< "${VARIANT_ENVS:-X=0}"
  for v in $names; do
    build_variant "$dir" "$v" || echo "variant $v: build failed" &
  done
  wait
  # bench_variant NAME ENV ARGS...: bench_prefill.py --no-fla on variant
  # NAME's library under ENV (NAME=VALUE words).
  bench_variant() {
    # shellcheck disable=SC2086 # $2 is a list of NAME=VALUE words
    env $2 PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0 python3 \
      tests/bench/bench_prefill.py --lib "$dir/build/$1/libdeltac_test_prefill.so" --no-fla \
      "${@:3}" 2>&1
  }
  for v in $names; do
    for e in "${envs[@]}"; do
      bench_variant "$v" "$e" --profile "$@" |
        grep -E "deltac_ms|deltac_rel_err|^kernel,|^host,|Error" | sed "s/^/$v,$e,/"
    done
    # The accuracy case alone through the tile-64 recur (the transposed
    # form on sm_90a) in both forms, under each environment: its dispatch
    # never takes the raw form, so this is what checks a variant's changes
    # there.
    for e in "${envs[@]}"; do
      for raw in 0 1; do
        local f=ordinary,tile=64
        [ "$raw" = 1 ] && f=raw_qk,tile=64
        bench_variant "$v" "$e DELTAC_PREFILL_FORCE=$f" \
          --accuracy-only "$@" | grep -E "deltac_rel_err|Error" | sed "s/^/$v,$e,$f,/"
      done
    done
  done | tee "$OUT/prefill_variants.txt"
}

# Context parallelism: the C API's phases (rank_phase_test), also in
# sm_80's code with every prefill case; across ranks (tests/gpu/test_cp.py):
# R ranks emulated on one GPU, then over NCCL on 2 and (where the machine
# has them) 4 GPUs.
run_cp_tests() {
  local status=0 gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  "$BUILD/rank_phase_test" > "$OUT/rank_phase_test.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/rank_phase_test.log" || tail -20 "$OUT/rank_phase_test.log"
  # sm_80's code (recur_cp on its mma.sync recur, forced onto this GPU):
  # the phases, and every prefill case through context parallelism, also
  # with the one-stage ring an A100 has at V tile 64.
  DELTAC_FORCE_TARGET=sm_80 "$BUILD/rank_phase_test" > "$OUT/rank_phase_test_sm80.log" 2>&1 ||
    status=1
  grep -E "^(FAIL|==)" "$OUT/rank_phase_test_sm80.log" | sed 's/^/sm_80 PTX: /'
  local cp
  for cp in cp cp,segments=8 cp,stages=1; do
    DELTAC_FORCE_TARGET=sm_80 force $cp "$BUILD/prefill_test" --quick \
      > "$OUT/prefill_test_sm80_${cp//,/_}.log" 2>&1 || status=1
    grep -E "^(FAIL|==)" "$OUT/prefill_test_sm80_${cp//,/_}.log" | sed "s/^/sm_80 PTX, $cp: /"
  done
  # FLA on the path: the context-parallel error must also be below FLA's
  # (test_cp.py fails without FLA unless DELTAC_TEST_NO_FLA=1).
  PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0 \
    python3 tests/gpu/test_cp.py "$BUILD" "$OUT" > "$OUT/test_cp.log" 2>&1 || status=1
  grep -E "^(FAIL|==)" "$OUT/test_cp.log" || tail -20 "$OUT/test_cp.log"
  if [ "$(cat "$OUT/runtime.txt")" != "gVisor" ] && command -v compute-sanitizer > /dev/null; then
    # The phases' kernels under memcheck (emulated ranks, R = 3).
    compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
      python3 tests/gpu/test_cp.py "$BUILD" "$OUT/cp_memcheck" --quick \
      > "$OUT/memcheck_cp.log" 2>&1 || status=1
    echo "memcheck_cp: $(grep -E 'ERROR SUMMARY|== test_cp' "$OUT/memcheck_cp.log" | tr '\n' ' ')"
  fi
  for n in 2 4; do
    [ "$gpus" -ge "$n" ] || continue
    PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0 NCCL_NVLS_ENABLE=0 \
      torchrun --standalone --nproc-per-node "$n" tests/gpu/test_cp.py \
      "$BUILD" "$OUT" --distributed > "$OUT/test_cp_$n.log" 2>&1 || status=1
    grep -E "^(FAIL|==)" "$OUT/test_cp_$n.log" || tail -20 "$OUT/test_cp_$n.log"
  done
  return $status
}

# One sequence of TOKENS (default 2^20) at H = HV = 16 on 2 and 4 GPUs
# against one GPU (rank 0's) in the same run.
run_cp_bench() {
  local gpus n
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  for n in 2 4; do
    [ "$gpus" -ge "$n" ] || continue
    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node "$n" tests/gpu/test_cp.py \
      "$BUILD" "$OUT" --bench --tokens "${TOKENS:-1048576}" 2>&1 | tee "$OUT/bench_cp_$n.log" |
      grep -E "^\|" || tail -20 "$OUT/bench_cp_$n.log"
  done
}

environment
case "${1:-all}" in
  test-cp) build rank_phase_test gdn_shared prefill_test && run_cp_tests ;;
  bench-cp) build && run_cp_bench ;;
  variants) run_variants ;;
  prefill-variants) run_prefill_variants "${@:2}" ;;
  build) build ;;
  # Each part stays under the device's 10 minutes a command (test and
  # test-forced split on 2026-11-26: together they took 599 s on an H100;
  # test-python about 6 to 7.5 minutes with a fresh build). On 2026-11-29
  # test-forced alone, with the full build, passed 600 s on an H200: the
  # test parts now build only their own targets, and racecheck and
  # synccheck moved from test to test-sanitize.
  test) build decode_test prefill_test capture_test && run_tests ;;
  test-sanitize) build prefill_test && run_sanitize_tests ;;
  test-forced) build decode_test prefill_test && run_forced_tests ;;
  test-python) build && run_python_tests ;;
  test-compile) build && run_compile_tests ;;
  test-wheel) build && run_wheel_tests ;;
  test-fla-backend) build && run_fla_backend_tests ;;
  test-fla-peer) build gdn_shared && run_fla_peer_tests "${@:2}" ;;
  test-all) build && { run_tests; s=$?; run_sanitize_tests || s=1; run_forced_tests || s=1
    run_python_tests || s=1
    run_compile_tests || s=1; exit $s; } ;;
  bench-prefill) build deltac_test_prefill_shared $([[ " $* " == *" --gdn-lib"* ]] && echo gdn_shared) &&
      environment && PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" FLA_FLASH_QLA=0 \
      python3 tests/bench/bench_prefill.py --lib "$BUILD/deltac_test_prefill/libdeltac_test_prefill.so" --out "$OUT" "${@:2}" ;;
  prefill) build prefill_test && environment && "$BUILD/prefill_test" "${@:2}" | tee "$OUT/prefill_test.log" | tail -25 ;;
  profile-decode) build && run_profile_decode ;;
  cold-start) build && python3 tests/gpu/cold_start.py "$BUILD" "${@:2}" | tee "$OUT/cold_start.log" ;;
  profile-prefill) { [ -n "${LIB:-}" ] || build deltac_test_prefill_shared; } && PYTHONPATH="${FLA_DIR:-$PWD/.fla}:${PYTHONPATH:-}" run_profile_prefill ;;
  bench) build && run_bench ;;
  bench-decode) build && run_bench_decode ;;
  all) build && { run_tests; s=$?; run_sanitize_tests || s=1; run_forced_tests || s=1; run_python_tests || s=1; run_bench; exit $s; } ;;
  *) echo "usage: $0 build|test|test-sanitize|test-forced|test-python|test-compile|test-wheel|test-fla-backend|test-fla-peer|test-cp|test-all|bench|bench-cp|bench-decode|all|variants|prefill|bench-prefill|profile-prefill|profile-decode|prefill-variants"; exit 2 ;;
esac
