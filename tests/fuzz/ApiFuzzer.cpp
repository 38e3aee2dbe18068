//===- ApiFuzzer.cpp - libFuzzer target over the generated host API -------===//
//
// Bytes in, one call out: an entry point of a generated library (decode,
// prefill or prefill_workspace_bytes; the table comes from
// tests/fuzz/api/CMakeLists.txt) with a deltac_decode_args or
// deltac_prefill_args filled from the bytes: sizes from interesting values
// or raw int64s, dtypes as any int, strides, flags, and every pointer null,
// a real host buffer of a fuzzed size (registered with the fake driver as
// "device memory" and filled with fuzz bytes, so debug mode's copies read
// fuzzed indices and offsets), the same buffer misaligned, or a wild
// address that is never registered.
//
// Two of three inputs start from a valid call of the entry (its K, V,
// dtypes and gate found by probing at start-up; sizes, indices, offsets,
// debug mode and int64 indices from the bytes) and change up to three
// fields, so that dispatch, debug mode and launches are reached; the rest
// are filled from the bytes alone.
//
// The fake CUDA driver (tests/fakecuda, compiled in, found by dlsym in the
// program itself) records loads and launches and reads only registered
// memory. Asserted for every call:
//   - the status is one of the five codes;
//   - a failed call has a non-empty last error and launched and zeroed
//     nothing;
//   - a successful call launched what the library reports
//     (last_launches), at least one kernel unless it is a prefill with
//     T = 0 and no final state, and every launch carries the values the
//     host checks promise (grid dimensions >= 1; decode: T, H, HV, slots,
//     strides as given or contiguous);
//   - prefill_workspace_bytes is -1 or positive, never another negative.
// Any crash, ASan or UBSan report, leak or assertion is a finding.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "deltac_api.h"
#include "deltac_decode.h"
#include "deltac_prefill.h"
#include "deltac_runtime.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {
struct ApiEntry {
  const char *name;
  int (*decode)(const deltac_decode_args *, void *);
  int (*prefill)(const deltac_prefill_args *, void *);
  int64_t (*workspace)(int64_t, int64_t, int64_t, int64_t, int64_t);
  const char *(*lastError)(void);
};
#include "api_entries.inc"
constexpr size_t kNumEntries = sizeof(kEntries) / sizeof(kEntries[0]);

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "ApiFuzzer: %s failed: ", #cond);                   \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

/// A launch as the fake driver saw it, decoded with the runtime's layout.
struct Launch {
  std::string kernel;
  unsigned grid[3], block;
  std::map<std::string, int64_t> params;
};
std::vector<Launch> *launches = nullptr;
const deltac_rt::ParamInfo *(*layout)(int *) = nullptr;

void onLaunch(const char *kernel, const unsigned grid[3], unsigned block,
              unsigned, void **params, void *) {
  int count = 0;
  const deltac_rt::ParamInfo *info = layout(&count);
  Launch l{kernel, {grid[0], grid[1], grid[2]}, block, {}};
  for (int i = 0; i < count; ++i) {
    int64_t value = 0;
    switch (info[i].kind) {
    case deltac_rt::ParamKind::I32: {
      int32_t v;
      std::memcpy(&v, params[i], 4);
      value = v;
      break;
    }
    case deltac_rt::ParamKind::F32: {
      uint32_t v;
      std::memcpy(&v, params[i], 4);
      value = v;
      break;
    }
    case deltac_rt::ParamKind::I64:
    case deltac_rt::ParamKind::Pointer:
      std::memcpy(&value, params[i], 8);
      break;
    case deltac_rt::ParamKind::TensorMap:
      break;
    }
    l.params[info[i].name] = value;
  }
  launches->push_back(std::move(l));
}

/// The host memory of one input: buffers standing in for device memory.
struct Memory {
  std::vector<std::unique_ptr<unsigned char[]>> blocks;
  FuzzedDataProvider &in;
  explicit Memory(FuzzedDataProvider &in) : in(in) {}

  /// A pointer of one of the classes the API must survive.
  void *pointer() {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return nullptr;
    case 1: // wild: never registered, never to be read
      return reinterpret_cast<void *>(
          uintptr_t(in.ConsumeIntegral<uint32_t>()) << 4);
    default: {
      size_t bytes = in.ConsumeIntegralInRange<size_t>(0, 4096);
      blocks.emplace_back(new unsigned char[bytes + 64]);
      unsigned char *base = blocks.back().get();
      auto aligned = reinterpret_cast<unsigned char *>(
          (reinterpret_cast<uintptr_t>(base) + 63) & ~uintptr_t(63));
      std::vector<uint8_t> fill = in.ConsumeBytes<uint8_t>(bytes);
      std::memset(aligned, 0, bytes);
      if (!fill.empty())
        std::memcpy(aligned, fill.data(), fill.size());
      // Misaligned by 1, 2, 4 or 8 bytes now and then.
      int shift = in.ConsumeIntegralInRange<int>(0, 7);
      size_t skew = shift < 4 ? 0 : size_t(1) << (shift - 4);
      if (skew > bytes)
        skew = 0;
      fakecuda_register_memory(aligned + skew, bytes - skew);
      return aligned + skew;
    }
    }
  }

  /// A size: a small or interesting value, or any int64.
  int64_t size(std::initializer_list<int64_t> typical) {
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return in.ConsumeIntegral<int64_t>();
    case 1: {
      static const int64_t edge[] = {0,       -1,          1,
                                     65535,   65536,       int64_t(1) << 31,
                                     int64_t(1) << 40,     (int64_t(1) << 40) + 1,
                                     int64_t(1) << 61,     INT64_MAX,
                                     INT64_MIN, 4096,      32, 33};
      return edge[in.ConsumeIntegralInRange<size_t>(0, std::size(edge) - 1)];
    }
    default: {
      std::vector<int64_t> t(typical);
      return t[in.ConsumeIntegralInRange<size_t>(0, t.size() - 1)];
    }
    }
  }
  int64_t stride(int64_t contiguous) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      return contiguous;
    case 1:
      return int64_t(uint64_t(contiguous) +
                     uint64_t(in.ConsumeIntegralInRange<int64_t>(-8, 8)));
    case 2:
      return size({-1, int64_t(1) << 44});
    default:
      return 0;
    }
  }
  /// Any int, as a C caller may store it (written, never loaded, as the
  /// enum: an out-of-range enumerator must not be loaded).
  void dtype(deltac_dtype &field) {
    int raw = in.ConsumeIntegralInRange<int>(0, 7) == 0
                  ? in.ConsumeIntegral<int>()
                  : in.ConsumeIntegralInRange<int>(0, 2);
    std::memcpy(&field, &raw, sizeof field);
  }
  float scale() {
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: {
      uint32_t bits = in.ConsumeIntegral<uint32_t>();
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return 0.088f;
    }
  }
};

/// a * b, wrapping (the fuzzer's guesses at contiguous strides may be
/// anything; the library must cope).
int64_t mulw(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

std::string recordedNames() {
  std::string out;
  for (int i = 0; i < fakecuda_launches(); ++i)
    out += (i ? "," : "") + std::string(fakecuda_launch_name(i));
  return out;
}

/// Calls per status code, and successful calls that launched (printed at
/// exit with DELTAC_API_FUZZER_STATS=1: how deep the inputs get).
long outcomes[DELTAC_INTERNAL_ERROR + 1], launchedCalls;

void checkOutcome(const ApiEntry &e, int rc, bool mayLaunchNothing) {
  CHECK(rc >= DELTAC_OK && rc <= DELTAC_INTERNAL_ERROR, "%s: rc %d", e.name, rc);
  ++outcomes[rc];
  launchedCalls += fakecuda_launches() > 0;
  if (rc != DELTAC_OK) {
    const char *message = e.lastError();
    CHECK(message && *message, "%s: rc %d with an empty message", e.name, rc);
    CHECK(fakecuda_launches() == 0 && fakecuda_memsets() == 0,
          "%s: rc %d (%s) but %d launches, %d memsets", e.name, rc, message,
          fakecuda_launches(), fakecuda_memsets());
    CHECK(deltac_rt::lastLaunches().empty(), "%s: rejected but reports %s",
          e.name, deltac_rt::lastLaunches().c_str());
    return;
  }
  CHECK(fakecuda_launches() > 0 || mayLaunchNothing,
        "%s: OK without a launch", e.name);
  CHECK(deltac_rt::lastLaunches() == recordedNames(),
        "%s: reports '%s', the driver saw '%s'", e.name,
        deltac_rt::lastLaunches().c_str(), recordedNames().c_str());
  for (const Launch &l : *launches)
    CHECK(l.grid[0] >= 1 && l.grid[1] >= 1 && l.grid[2] >= 1 && l.block >= 32,
          "%s: launch of %s with grid %u x %u x %u, block %u", e.name,
          l.kernel.c_str(), l.grid[0], l.grid[1], l.grid[2], l.block);
}

void callDecode(const ApiEntry &e, const deltac_decode_args &a, bool withArgs);
/// Entry i of an int32 (int64 with `wide`) array in the fuzzer's memory.
int64_t valueAt(const void *p, int64_t i, bool wide) {
  const auto *bytes = static_cast<const unsigned char *>(p);
  if (wide) {
    int64_t v;
    std::memcpy(&v, bytes + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, bytes + i * 4, 4);
  return v;
}
void callPrefill(const ApiEntry &e, const deltac_prefill_args &a, bool withArgs);

void fuzzDecode(const ApiEntry &e, Memory &m) {
  deltac_decode_args a{};
  a.K = m.size({64, 128, 256});
  a.V = m.in.ConsumeBool() ? a.K : m.size({64, 128, 256});
  a.B = m.size({1, 2, 3, 8});
  a.T = m.size({1, 2, 3, 4, 16});
  a.H = m.size({1, 2, 4});
  a.HV = m.size({1, 2, 4, 8});
  m.dtype(a.io_dtype);
  m.dtype(a.state_dtype);
  a.q = m.pointer();
  a.q_stride = m.stride(mulw(a.H, a.K));
  a.k = m.pointer();
  a.k_stride = m.stride(mulw(a.H, a.K));
  a.v = m.pointer();
  a.v_stride = m.stride(mulw(a.HV, a.V));
  a.o = m.pointer();
  a.o_stride = m.stride(mulw(a.HV, a.V));
  a.g = m.pointer();
  a.beta = m.pointer();
  a.A_log = static_cast<const float *>(m.pointer());
  a.dt_bias = static_cast<const float *>(m.pointer());
  a.state = m.pointer();
  a.slots = m.size({1, 2, 4, 8});
  a.initial_state_indices = static_cast<const int32_t *>(m.pointer());
  a.output_state_indices = static_cast<const int32_t *>(m.pointer());
  a.step_states = m.pointer();
  a.keep_pool = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  a.error_flag = static_cast<int32_t *>(m.pointer());
  a.scale = m.scale();
  a.debug_checks = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  if (m.in.ConsumeBool()) {
    a.state_indices_2d = static_cast<const int32_t *>(m.pointer());
    a.state_indices_2d_stride = m.size({0, 1, 4, 8});
    a.num_accepted_tokens = static_cast<const int32_t *>(m.pointer());
  }
  if (m.in.ConsumeBool())
    a.cu_seqlens = static_cast<const int32_t *>(m.pointer());
  a.indices_i64 = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  callDecode(e, a, m.in.ConsumeBool());
}

void callDecode(const ApiEntry &e, const deltac_decode_args &a, bool withArgs) {
  layout = &deltac_rt::decodeParamLayout;
  int rc = e.decode(withArgs ? &a : nullptr, nullptr);
  checkOutcome(e, rc, false);
  if (rc != DELTAC_OK)
    return;
  for (const Launch &l : *launches) {
    const auto &p = l.params;
    CHECK(p.at("T") == a.T && p.at("H") == a.H && p.at("HV") == a.HV &&
              p.at("slots") == a.slots,
          "%s: launched with other sizes", e.name);
    CHECK(p.at("q") == int64_t(uintptr_t(a.q)) &&
              p.at("o") == int64_t(uintptr_t(a.o)) &&
              p.at("state") == int64_t(uintptr_t(a.state)),
          "%s: launched with other pointers", e.name);
    for (const char *s : {"q_stride", "k_stride", "v_stride", "o_stride"})
      CHECK(p.at(s) >= 1, "%s: %s = %lld", e.name, s, (long long)p.at(s));
    CHECK(a.B <= a.slots || a.initial_state_indices || a.state_indices_2d,
          "%s: B > slots without indices launched", e.name);
  }
  if (!withArgs || !a.debug_checks)
    return;
  // Debug mode passed: every index a row uses was below slots, and
  // cu_seqlens and the accepted counts were in range. (The copies
  // succeeded, so this memory is the fuzzer's own.)
  bool wide = a.indices_i64;
  for (const void *idx : {static_cast<const void *>(a.initial_state_indices),
                          static_cast<const void *>(a.output_state_indices)})
    for (int64_t b = 0; idx && b < a.B; ++b)
      CHECK(valueAt(idx, b, wide) < a.slots, "%s: debug mode passed index %lld >= slots",
            e.name, (long long)valueAt(idx, b, wide));
  if (a.cu_seqlens) {
    CHECK(valueAt(a.cu_seqlens, 0, wide) == 0, "%s: debug mode passed cu[0] != 0", e.name);
    for (int64_t b = 0; b < a.B; ++b)
      CHECK(valueAt(a.cu_seqlens, b + 1, wide) >= valueAt(a.cu_seqlens, b, wide) &&
                valueAt(a.cu_seqlens, b + 1, wide) <= a.T,
            "%s: debug mode passed a bad cu_seqlens", e.name);
  }
}

void fuzzPrefill(const ApiEntry &e, Memory &m) {
  if (m.in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    int64_t K = m.size({64, 128, 256}), V = m.size({64, 128, 256}),
            T = m.size({0, 1, 64, 4096}), N = m.size({1, 2, 33}),
            HV = m.size({1, 4, 32});
    int64_t bytes = e.workspace(K, V, T, N, HV);
    CHECK(bytes == -1 || bytes > 0,
          "%s_workspace_bytes(%lld, %lld, %lld, %lld, %lld) = %lld", e.name,
          (long long)K, (long long)V, (long long)T, (long long)N,
          (long long)HV, (long long)bytes);
    CHECK(bytes == -1 || (N >= 1 && T >= 0 && HV >= 1),
          "%s_workspace_bytes accepted N = %lld, T = %lld, HV = %lld", e.name,
          (long long)N, (long long)T, (long long)HV);
    return;
  }
  deltac_prefill_args a{};
  a.K = m.size({64, 128, 256});
  a.V = m.in.ConsumeBool() ? a.K : m.size({64, 128, 256});
  a.T = m.size({0, 1, 64, 100, 128});
  a.N = m.size({1, 2, 33});
  a.H = m.size({1, 2, 4});
  a.HV = m.size({1, 2, 4, 8});
  m.dtype(a.io_dtype);
  m.dtype(a.state_dtype);
  a.q = m.pointer();
  a.q_stride = m.stride(mulw(a.H, a.K));
  a.k = m.pointer();
  a.k_stride = m.stride(mulw(a.H, a.K));
  a.v = m.pointer();
  a.v_stride = m.stride(mulw(a.HV, a.V));
  a.o = m.pointer();
  a.o_stride = m.stride(mulw(a.HV, a.V));
  a.g = m.pointer();
  a.beta = m.pointer();
  a.A_log = static_cast<const float *>(m.pointer());
  a.dt_bias = static_cast<const float *>(m.pointer());
  a.initial_state = m.pointer();
  a.final_state = m.pointer();
  a.slots = m.size({0, 1, 2, 4});
  a.initial_state_indices = static_cast<const int32_t *>(m.pointer());
  a.output_state_indices = static_cast<const int32_t *>(m.pointer());
  if (m.in.ConsumeBool())
    a.cu_seqlens = m.pointer();
  a.cu_seqlens_i64 = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  a.workspace = m.pointer();
  int64_t need = e.workspace(a.K, a.V, a.T, a.N, a.HV);
  a.workspace_bytes = m.in.ConsumeBool() ? need : m.size({0, 1 << 20});
  a.error_flag = static_cast<int32_t *>(m.pointer());
  a.scale = m.scale();
  a.debug_checks = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  a.max_seqlen = m.size({0, 1, 64, 128});
  a.indices_i64 = m.in.ConsumeIntegralInRange<int32_t>(0, 1);
  callPrefill(e, a, m.in.ConsumeBool());
}

void callPrefill(const ApiEntry &e, const deltac_prefill_args &a, bool withArgs) {
  layout = &deltac_rt::prefillParamLayout;
  int rc = e.prefill(withArgs ? &a : nullptr, nullptr);
  checkOutcome(e, rc, a.T == 0 && !a.final_state);
  if (rc != DELTAC_OK)
    return;
  int64_t need = e.workspace(a.K, a.V, a.T, a.N, a.HV);
  CHECK(a.workspace_bytes >= need && need > 0,
        "%s: launched with workspace_bytes %lld < %lld", e.name,
        (long long)a.workspace_bytes, (long long)need);
  for (const Launch &l : *launches)
    CHECK(l.params.at("T") == a.T && l.params.at("N") == a.N &&
              l.params.at("work") == int64_t(uintptr_t(a.workspace)),
          "%s: launched with other sizes or workspace", e.name);
  if (!withArgs || !a.debug_checks)
    return;
  // Debug mode passed (see callDecode).
  int64_t slots = a.slots ? a.slots : a.N;
  for (const void *idx : {static_cast<const void *>(a.initial_state_indices),
                          static_cast<const void *>(a.output_state_indices)})
    for (int64_t n = 0; idx && n < a.N; ++n)
      CHECK(valueAt(idx, n, a.indices_i64) < slots,
            "%s: debug mode passed index %lld >= slots", e.name,
            (long long)valueAt(idx, n, a.indices_i64));
  if (a.cu_seqlens) {
    bool wide = a.cu_seqlens_i64;
    CHECK(valueAt(a.cu_seqlens, 0, wide) == 0, "%s: debug mode passed cu[0] != 0", e.name);
    for (int64_t n = 0; n < a.N; ++n)
      CHECK(valueAt(a.cu_seqlens, n + 1, wide) >= valueAt(a.cu_seqlens, n, wide) &&
                valueAt(a.cu_seqlens, n + 1, wide) <= a.T,
            "%s: debug mode passed a bad cu_seqlens", e.name);
  }
}
} // namespace

/// A configuration each entry accepts (found at start-up by probing), the
/// base of the "valid call, then a few fields changed" inputs: those get
/// past the checks and reach dispatch, debug mode and launches.
struct Base {
  bool found = false;
  int64_t K = 0, V = 0;
  int io = 0, state = 0;
  bool noGate = false; // rule delta: g must be null
};
std::vector<Base> *bases = nullptr;

/// A 16-byte aligned address that is never device memory the fake reads
/// (large tensors: the fake driver never dereferences them).
void *wild(int i) {
  return reinterpret_cast<void *>(uintptr_t(0x7f0000000000) + (uintptr_t(i) << 36));
}

void setDtypes(deltac_dtype &io, deltac_dtype &state, const Base &b) {
  std::memcpy(&io, &b.io, sizeof io);
  std::memcpy(&state, &b.state, sizeof state);
}

/// Registered host memory for `count` values (int32, or int64 with `wide`).
unsigned char *valueArray(Memory &m, const std::vector<int64_t> &values,
                          bool wide) {
  size_t bytes = values.size() * (wide ? 8 : 4);
  m.blocks.emplace_back(new unsigned char[bytes + 16]);
  auto *p = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(m.blocks.back().get()) + 15) & ~uintptr_t(15));
  for (size_t i = 0; i < values.size(); ++i) {
    if (wide) {
      std::memcpy(p + i * 8, &values[i], 8);
    } else {
      int32_t v = int32_t(values[i]);
      std::memcpy(p + i * 4, &v, 4);
    }
  }
  fakecuda_register_memory(p, bytes);
  return p;
}

/// Index values drawn from [lo, hi].
void *indexArray(Memory &m, int64_t count, bool wide, int64_t lo, int64_t hi) {
  std::vector<int64_t> v(count);
  for (int64_t &x : v)
    x = m.in.ConsumeIntegralInRange<int64_t>(lo, hi);
  return valueArray(m, v, wide);
}

/// Offsets 0 = cu[0] <= ... <= cu[n] = total, now and then broken.
void *offsets(Memory &m, int64_t n, int64_t total, bool wide) {
  std::vector<int64_t> cu(n + 1, 0);
  for (int64_t i = 1; i < n; ++i)
    cu[i] = m.in.ConsumeIntegralInRange<int64_t>(0, total);
  cu[n] = total;
  std::sort(cu.begin(), cu.end());
  if (m.in.ConsumeIntegralInRange<int>(0, 7) == 0)
    cu[m.in.ConsumeIntegralInRange<int64_t>(0, n)] =
        m.in.ConsumeIntegralInRange<int64_t>(-2, total + 2);
  return valueArray(m, cu, wide);
}

deltac_decode_args validDecode(const Base &b, Memory &m) {
  deltac_decode_args a{};
  a.K = b.K;
  a.V = b.V;
  setDtypes(a.io_dtype, a.state_dtype, b);
  a.B = m.in.ConsumeIntegralInRange<int64_t>(1, 8);
  a.T = m.in.ConsumeIntegralInRange<int64_t>(1, 2);
  a.H = m.in.ConsumeIntegralInRange<int64_t>(1, 4);
  a.HV = a.H * m.in.ConsumeIntegralInRange<int64_t>(1, 4);
  a.q = wild(0);
  a.k = wild(1);
  a.v = wild(2);
  a.o = wild(3);
  a.g = b.noGate ? nullptr : wild(4);
  a.beta = wild(5);
  a.A_log = static_cast<const float *>(wild(6));
  a.dt_bias = static_cast<const float *>(wild(7));
  a.state = wild(8);
  a.slots = a.B + m.in.ConsumeIntegralInRange<int64_t>(0, 4);
  a.error_flag = static_cast<int32_t *>(wild(9));
  a.scale = 0.088f;
  a.debug_checks = m.in.ConsumeBool();
  a.indices_i64 = m.in.ConsumeBool();
  bool wide = a.indices_i64;
  if (m.in.ConsumeBool()) {
    a.T = m.in.ConsumeIntegralInRange<int64_t>(1, 4 * a.B);
    a.cu_seqlens = static_cast<const int32_t *>(offsets(m, a.B, a.T, wide));
  }
  switch (m.in.ConsumeIntegralInRange<int>(0, 3)) {
  case 0:
    break;
  case 1:
    a.initial_state_indices = static_cast<const int32_t *>(
        indexArray(m, a.B, wide, -1, a.slots));
    if (m.in.ConsumeBool())
      a.output_state_indices = static_cast<const int32_t *>(
          indexArray(m, a.B, wide, -1, a.slots));
    break;
  default: {
    a.state_indices_2d_stride = m.in.ConsumeIntegralInRange<int64_t>(
        a.cu_seqlens ? 1 : 0, 6);
    int64_t stride = a.state_indices_2d_stride ? a.state_indices_2d_stride : a.T;
    a.state_indices_2d = static_cast<const int32_t *>(
        indexArray(m, a.B * stride, wide, -1, a.slots));
    if (m.in.ConsumeBool())
      a.num_accepted_tokens = static_cast<const int32_t *>(
          indexArray(m, a.B, wide, 0, stride + 1));
  }
  }
  if (m.in.ConsumeBool()) {
    a.step_states = wild(10);
    a.keep_pool = m.in.ConsumeBool();
  }
  return a;
}

deltac_prefill_args validPrefill(const ApiEntry &e, const Base &b, Memory &m) {
  deltac_prefill_args a{};
  a.K = b.K;
  a.V = b.V;
  setDtypes(a.io_dtype, a.state_dtype, b);
  a.N = m.in.ConsumeIntegralInRange<int64_t>(1, 40);
  a.T = m.in.ConsumeBool() ? a.N * m.in.ConsumeIntegralInRange<int64_t>(0, 96)
                           : m.in.ConsumeIntegralInRange<int64_t>(0, 3000);
  a.H = m.in.ConsumeIntegralInRange<int64_t>(1, 4);
  a.HV = a.H * m.in.ConsumeIntegralInRange<int64_t>(1, 8);
  a.q = wild(0);
  a.k = wild(1);
  a.v = wild(2);
  a.o = wild(3);
  a.g = b.noGate ? nullptr : wild(4);
  a.beta = wild(5);
  a.A_log = static_cast<const float *>(wild(6));
  a.dt_bias = static_cast<const float *>(wild(7));
  if (m.in.ConsumeBool())
    a.initial_state = wild(8);
  if (m.in.ConsumeBool())
    a.final_state = wild(9);
  a.slots = m.in.ConsumeBool() ? 0 : a.N + m.in.ConsumeIntegralInRange<int64_t>(0, 4);
  a.indices_i64 = m.in.ConsumeBool();
  int64_t slots = a.slots ? a.slots : a.N;
  if (m.in.ConsumeBool())
    a.initial_state_indices = static_cast<const int32_t *>(
        indexArray(m, a.N, a.indices_i64, -1, slots));
  if (m.in.ConsumeBool())
    a.output_state_indices = static_cast<const int32_t *>(
        indexArray(m, a.N, a.indices_i64, -1, slots));
  if (a.T % a.N != 0 || m.in.ConsumeBool()) {
    a.cu_seqlens_i64 = m.in.ConsumeBool();
    a.cu_seqlens = offsets(m, a.N, a.T, a.cu_seqlens_i64);
  }
  a.workspace = wild(11);
  a.workspace_bytes = e.workspace(a.K, a.V, a.T, a.N, a.HV);
  a.error_flag = static_cast<int32_t *>(wild(12));
  a.scale = 0.088f;
  a.debug_checks = m.in.ConsumeBool();
  return a;
}

/// A valid call with up to three fields changed to fuzzed values.
void fuzzFromBase(const ApiEntry &e, const Base &b, Memory &m) {
  int changes = m.in.ConsumeIntegralInRange<int>(0, 3);
  if (e.decode) {
    deltac_decode_args a = validDecode(b, m);
    for (int i = 0; i < changes; ++i) {
      switch (m.in.ConsumeIntegralInRange<int>(0, 11)) {
      case 0: a.B = m.size({0, 9, 65535, 65536}); break;
      case 1: a.T = m.size({0, 5, 64}); break;
      case 2: a.H = m.size({0, 3}); break;
      case 3: a.HV = m.size({0, 65536}); break;
      case 4: a.slots = m.size({0, 1}); break;
      case 5: a.q_stride = m.stride(mulw(a.H, a.K)); break;
      case 6: a.v_stride = m.stride(mulw(a.HV, a.V)); break;
      case 7: a.o_stride = m.stride(mulw(a.HV, a.V)); break;
      case 8: a.state_indices_2d_stride = m.size({0, 1, 65536, 65537}); break;
      case 9: a.scale = m.scale(); break;
      case 10: a.g = m.pointer(); break;
      default: a.error_flag = static_cast<int32_t *>(m.pointer()); break;
      }
    }
    callDecode(e, a, true);
  } else {
    deltac_prefill_args a = validPrefill(e, b, m);
    for (int i = 0; i < changes; ++i) {
      switch (m.in.ConsumeIntegralInRange<int>(0, 10)) {
      case 0: a.T = m.size({-1, 1 << 20}); break;
      case 1: a.N = m.size({0, 33, 1 << 20}); break;
      case 2: a.HV = m.size({0, 65536}); break;
      case 3: a.slots = m.size({-1, 1}); break;
      case 4: a.workspace_bytes = m.size({0, 256}); break;
      case 5: a.max_seqlen = m.size({1, 64, 4096}); break;
      case 6: a.k_stride = m.stride(mulw(a.H, a.K)); break;
      case 7: a.o_stride = m.stride(mulw(a.HV, a.V)); break;
      case 8: a.scale = m.scale(); break;
      case 9: a.g = m.pointer(); break;
      default: a.workspace = m.pointer(); break;
      }
    }
    callPrefill(e, a, true);
  }
}

/// Finds a (K, V, dtypes) each entry accepts: a minimal valid call of each
/// combination the libraries use, the first that gets past the checks.
void probeBases() {
  bases = new std::vector<Base>(kNumEntries);
  static const uint8_t none[1] = {0};
  auto probe = [](size_t i, const Base &trial) {
    FuzzedDataProvider in(none, 0); // all minimal: B = T = N = 1, ...
    Memory m(in);
    fakecuda_reset();
    launches->clear();
    if (kEntries[i].decode) {
      deltac_decode_args a = validDecode(trial, m);
      layout = &deltac_rt::decodeParamLayout;
      return kEntries[i].decode(&a, nullptr) == DELTAC_OK;
    }
    deltac_prefill_args a = validPrefill(kEntries[i], trial, m);
    a.T = 64;
    a.workspace_bytes = kEntries[i].workspace(a.K, a.V, a.T, a.N, a.HV);
    layout = &deltac_rt::prefillParamLayout;
    return kEntries[i].prefill(&a, nullptr) == DELTAC_OK;
  };
  for (size_t i = 0; i < kNumEntries; ++i) {
    Base &b = (*bases)[i];
    for (int64_t K : {128, 64, 256})
      for (int64_t V : {128, 64, 256})
        for (int io : {DELTAC_BF16, DELTAC_F16})
          for (int state : {DELTAC_F32, DELTAC_BF16})
            for (bool noGate : {false, true})
              if (!b.found && probe(i, Base{true, K, V, io, state, noGate}))
                b = Base{true, K, V, io, state, noGate};
    if (!b.found)
      std::fprintf(stderr, "ApiFuzzer: no valid call found for %s (%s)\n",
                   kEntries[i].name, kEntries[i].lastError());
  }
  fakecuda_reset();
  launches->clear();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // The fake driver's entry points are compiled into this program.
  if (!deltac_rt::useDriverLibrary("")) {
    std::fprintf(stderr, "ApiFuzzer: cannot inject the fake driver\n");
    std::abort();
  }
  launches = new std::vector<Launch>;
  if (const char *stats = std::getenv("DELTAC_API_FUZZER_STATS"); stats && *stats == '1')
    std::atexit([] {
      std::fprintf(stderr,
                   "ApiFuzzer: ok %ld (launched %ld), invalid %ld, unsupported "
                   "%ld, cuda error %ld, internal %ld\n",
                   outcomes[0], launchedCalls, outcomes[1], outcomes[2],
                   outcomes[3], outcomes[4]);
    });
  fakecuda_set_launch_hook(&onLaunch, nullptr);
  probeBases();
  // The fake's default device, a Hopper (9.0, 132 SMs): the sm_90a paths
  // (overlapped and raw prefill launches, tensor maps) are taken. Kernels
  // load once per process, so the device stays the same for every input.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  fakecuda_reset();
  launches->clear();
  const ApiEntry &e =
      kEntries[in.ConsumeIntegralInRange<size_t>(0, kNumEntries - 1)];
  Memory m(in);
  size_t index = size_t(&e - kEntries);
  if ((*bases)[index].found && in.ConsumeIntegralInRange<int>(0, 2) > 0)
    fuzzFromBase(e, (*bases)[index], m);
  else if (e.decode)
    fuzzDecode(e, m);
  else
    fuzzPrefill(e, m);
  return 0;
}
