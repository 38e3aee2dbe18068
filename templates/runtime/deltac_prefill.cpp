// deltac_prefill.cpp - host-side checks and launch of the prefill kernels.
#include "deltac_prefill.h"
#include "deltac_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace deltac_rt {
namespace {
// DELTAC_PREFILL_FORCE as this process read it (once) and why it is no
// valid request ("" where it is).
struct ForceSetting {
  PrefillForce force;
  std::string error;
};
const ForceSetting &forceSetting() {
  static const ForceSetting setting = [] {
    ForceSetting s;
    s.error = parsePrefillForce(std::getenv("DELTAC_PREFILL_FORCE"), &s.force);
    return s;
  }();
  return setting;
}

int64_t maxChunks(const PrefillVariant &v, int64_t T, int64_t N) {
  return (T + v.chunk - 1) / v.chunk + N;
}

/// Debug mode: cu_seqlens and the state indices, copied (in bounded
/// blocks) and checked.
deltac::Status checkDeviceData(const deltac_prefill_args &a, const PrefillVariant &v,
                               int64_t slots, void *stream) {
  // Sequence n's tokens [bos[n], bos[n + 1]) (FlashInfer's checkpoints
  // need their lengths).
  std::vector<int64_t> bos;
  bool wantLengths = a.checkpoints || a.checkpoint_starts;
  if (wantLengths && !a.cu_seqlens)
    for (int64_t n = 0; n <= a.N; ++n)
      bos.push_back(n * (a.T / a.N));
  if (a.cu_seqlens) {
    int64_t previous = 0;
    if (deltac::Status s = scanDeviceIndices(
            a.cu_seqlens, 0, a.N + 1, a.cu_seqlens_i64, stream,
            [&](int64_t n, int64_t cu) -> std::string {
              if (n == 0 && cu != 0)
                return "cu_seqlens[0] = " + std::to_string(cu) + " must be 0";
              if (n > 0 && cu < previous)
                return "cu_seqlens decreases at " + std::to_string(n) + " (" +
                       std::to_string(previous) + " then " +
                       std::to_string(cu) + ")";
              // Tokens past cu_seqlens[N] (a serving engine's padding) get
              // o = 0; no entry may lie past T.
              if (cu > a.T)
                return "cu_seqlens[" + std::to_string(n) + "] = " +
                       std::to_string(cu) + " must not exceed T = " +
                       std::to_string(a.T);
              previous = cu;
              if (wantLengths)
                bos.push_back(cu);
              return "";
            });
        !s.ok())
      return s;
  }
  if (wantLengths && !a.checkpoint_starts && a.cu_seqlens) {
    // FLA's form: one row per chunk of every sequence.
    int64_t chunks = 0;
    for (int64_t n = 0; n < a.N; ++n)
      chunks += (bos[n + 1] - bos[n] + v.chunk - 1) / v.chunk;
    if (chunks > a.checkpoint_rows)
      return invalid("checkpoint_rows = " + std::to_string(a.checkpoint_rows) +
                     " is below the " + std::to_string(chunks) +
                     " chunks whose entering states this call keeps");
  }
  if (wantLengths && a.checkpoint_starts) {
    int64_t perCheckpoint = a.checkpoint_every_n_tokens;
    if (deltac::Status s = scanDeviceIndices(
            a.checkpoint_starts, 0, a.N, true, stream,
            [&](int64_t n, int64_t start) -> std::string {
              int64_t count = (bos[n + 1] - bos[n]) / perCheckpoint;
              if (count > 0 && (start < 0 || start > a.checkpoint_rows - count))
                return "checkpoint_starts[" + std::to_string(n) + "] = " +
                       std::to_string(start) + " places sequence " + std::to_string(n) +
                       "'s " + std::to_string(count) + " checkpoints outside [0, " +
                       std::to_string(a.checkpoint_rows) + ")";
              return "";
            });
        !s.ok())
      return s;
  }
  for (auto [name, idx] :
       {std::pair<const char *, const void *>{"initial_state_indices",
                                              a.initial_state_indices},
        {"output_state_indices", a.output_state_indices}}) {
    if (!idx)
      continue;
    if (deltac::Status s = scanDeviceIndices(
            idx, 0, a.N, a.indices_i64, stream,
            [&, name = name](int64_t n, int64_t slot) -> std::string {
              if (slot >= slots)
                return std::string(name) + "[" + std::to_string(n) + "] = " +
                       std::to_string(slot) + " is not below slots = " +
                       std::to_string(slots);
              return "";
            });
        !s.ok())
      return s;
  }
  return {};
}

/// The checkpoint arguments (deltac_api.h; "" when they hold). `every`:
/// the kernels' chunks between FlashInfer's checkpoints (1 for FLA's).
std::string checkCheckpoints(const PrefillVariant &v, const deltac_prefill_args &a,
                             int32_t &every) {
  every = 1;
  const std::string nTokens =
      "checkpoint_every_n_tokens = " + std::to_string(a.checkpoint_every_n_tokens);
  if (!a.checkpoints && !a.checkpoint_starts) {
    if (a.checkpoint_every_n_tokens != 0)
      return nTokens + " is set but checkpoints is null";
    return "";
  }
  // FlashInfer's form may have no rows (no sequence reaches n tokens; one
  // that does raises error_flag): checkpoints may then be null.
  bool noRows = a.checkpoint_starts && a.checkpoint_rows == 0;
  if (!a.checkpoints && !noRows)
    return "checkpoints is null but checkpoint_starts is set and checkpoint_rows = " +
           std::to_string(a.checkpoint_rows);
  int dtype = rawDtype(a.checkpoint_dtype);
  if (dtype != DELTAC_F32 && dtype != rawDtype(v.io))
    return "checkpoint_dtype " + dtypeName(dtype) + " must be f32 or the io dtype " +
           dtypeName(rawDtype(v.io));
  if (!aligned16(a.checkpoints))
    return "checkpoints must be 16-byte aligned";
  if (a.checkpoint_rows < (a.checkpoint_starts ? 0 : 1))
    return "checkpoint_rows = " + std::to_string(a.checkpoint_rows) + " must be " +
           (a.checkpoint_starts ? "non-negative" : "positive");
  if (std::string e = checkExtent("checkpoints (checkpoint_rows * HV * K * V)",
                                  {a.checkpoint_rows, a.HV, v.K * v.V,
                                   dtypeBytes(a.checkpoint_dtype)});
      !e.empty())
    return e;
  if (!a.checkpoint_starts) {
    // FLA's form: every chunk's entering state, one row per chunk.
    if (a.checkpoint_every_n_tokens != 0)
      return nTokens + " needs checkpoint_starts (without them every chunk's entering "
                       "state is kept)";
    // N sequences of T / N tokens: the host knows the rows the call fills.
    int64_t need = a.N * ((a.T / a.N + v.chunk - 1) / v.chunk);
    if (!a.cu_seqlens && a.checkpoint_rows < need)
      return "checkpoint_rows = " + std::to_string(a.checkpoint_rows) + " is below the " +
             std::to_string(need) + " chunks (N * ceil(T / N / " + std::to_string(v.chunk) +
             ")) whose entering states this call keeps";
    return "";
  }
  if (a.checkpoint_every_n_tokens <= 0 || a.checkpoint_every_n_tokens % v.chunk != 0 ||
      a.checkpoint_every_n_tokens / v.chunk > INT32_MAX)
    return nTokens + " must be a positive multiple of the spec's chunk (" +
           std::to_string(v.chunk) + ") below 2^31 chunks";
  if (!alignedTo(a.checkpoint_starts, 8))
    return "checkpoint_starts must be 8-byte aligned (int64)";
  every = int32_t(a.checkpoint_every_n_tokens / v.chunk);
  return "";
}

/// The host's bounds on a call's sizes ("" when they hold): N in [1, 2^30],
/// T in [0, 2^40], HV in [1, 65535], and both one-dimensional grids below
/// 2^31 blocks (so that every workspace size is far from overflowing).
std::string checkSizes(const PrefillVariant &v, int64_t T, int64_t N,
                       int64_t HV) {
  if (N < 1 || N > (int64_t(1) << 30))
    return "N = " + std::to_string(N) + " must lie in [1, 2^30]";
  if (T < 0 || T > (int64_t(1) << 40))
    return "T = " + std::to_string(T) + " must lie in [0, 2^40]";
  if (HV < 1 || HV > 65535)
    return "HV = " + std::to_string(HV) + " must lie in [1, 65535]";
  // The grids are one-dimensional: N * HV * (V / 16) recur blocks and
  // (T / C + N) * HV chunks blocks at most.
  if (N * HV * std::max<int64_t>(v.V / 16, 1) >= (int64_t(1) << 31) ||
      maxChunks(v, T, N) * HV >= (int64_t(1) << 31))
    return "T = " + std::to_string(T) + ", N = " + std::to_string(N) +
           ", HV = " + std::to_string(HV) +
           " is too large (N * HV * V / 16 and (T / chunk + N) * HV must stay "
           "below 2^31)";
  return "";
}
} // namespace

int64_t prefillOverlapRegion(const PrefillVariant &v, int64_t T, int64_t N,
                             int64_t HV, int64_t *bytes) {
  int64_t chunks = maxChunks(v, T, N) * HV;
  *bytes = deltac_abi::prefillOverlapRegionBytes(chunks);
  return deltac_abi::prefillOverlapRegionOffset(v.chunk, v.K, v.V,
                                                perChannel(v.gate), chunks, N);
}

int64_t prefillMinimumWorkspaceBytes(const PrefillVariant &v, int64_t T, int64_t N,
                                     int64_t HV) {
  // -1 for any size the host would reject (negative, or so large that the
  // grids or the sizes below could overflow).
  try {
    if (v.chunk < 1 || !checkSizes(v, T, N, HV).empty())
      return -1;
  } catch (...) { // the message's allocation; nothing crosses the C API
    return -1;
  }
  int64_t overlapBytes = 0;
  int64_t total = prefillOverlapRegion(v, T, N, HV, &overlapBytes);
  return total < 0 || overlapBytes < 0 ? -1 : total + overlapBytes;
}

int64_t prefillWorkspaceBytes(const PrefillVariant &v, int64_t T, int64_t N,
                              int64_t HV) {
  int64_t total = prefillMinimumWorkspaceBytes(v, T, N, HV);
  if (total < 0 || !v.recurCp)
    return total;
  // Context parallelism's regions 8-10 (deltac_abi::prefillSegmentRegionBytes).
  for (int64_t r : deltac_abi::prefillSegmentRegionBytes(v.chunk, v.K, v.V,
                                                        maxChunks(v, T, N) * HV,
                                                        deltac_abi::prefillSegmentSlots(N, HV)))
    total += r;
  return total;
}

int64_t segmentTiles(const PrefillVariant &v) {
  int64_t tile = v.V / std::max(1u, v.valueTiles);
  return v.valueTiles + v.K / tile;
}

int64_t segmentBlocks(const PrefillVariant &v, int64_t N, int64_t HV, int segments) {
  return N * HV * (v.valueTiles + int64_t(segments - 1) * segmentTiles(v));
}

int chooseRankSegments(const PrefillVariant &v, int64_t N, int64_t HV, int sms) {
  if (!v.recurCp || N * HV > deltac_abi::prefillSegmentSlots(N, HV))
    return 0;
  int best = 1;
  for (int n = 2; n <= deltac_abi::kMaxSegments; n *= 2)
    if (N * HV * n <= deltac_abi::prefillSegmentSlots(N, HV) &&
        N * HV * n * segmentTiles(v) <= sms)
      best = n;
  return best;
}

int chooseSegments(const PrefillVariant &v, int64_t N, int64_t HV, int sms, int64_t T,
                   int64_t maxSeqlen) {
  if (!v.recurCp || sms <= 0 || N <= 0)
    return 0;
  int64_t busy = maxSeqlen > 0 ? std::clamp<int64_t>(T / maxSeqlen, 1, N) : N;
  if (busy * HV * v.valueTiles * 8 > v.segmentEighthsPerSM * int64_t(sms) ||
      T / busy < v.segmentMinTokens)
    return 0;
  int best = 0;
  for (int n = 2; n <= deltac_abi::kMaxSegments; n *= 2)
    if (N * HV * n <= deltac_abi::kMaxSegmentHeads && segmentBlocks(v, busy, HV, n) <= sms)
      best = n;
  return best;
}

const PrefillVariant *findPrefillVariant(const PrefillVariant *variants,
                                         int count, int64_t K, int64_t V,
                                         deltac::Status &status) {
  for (int i = 0; i < count; ++i)
    if (variants[i].K == K && variants[i].V == V)
      return &variants[i];
  status = guarded([&]() -> deltac::Status {
  std::string available;
  for (int i = 0; i < count; ++i) {
    // Variants of one (K, V) are adjacent in the table: list each pair once.
    if (i > 0 && variants[i - 1].K == variants[i].K &&
        variants[i - 1].V == variants[i].V)
      continue;
    available += (available.empty() ? "" : ", ") +
                 std::to_string(variants[i].K) + "x" +
                 std::to_string(variants[i].V);
  }
  return {DELTAC_UNSUPPORTED, "K = " + std::to_string(K) + ", V = " +
                                 std::to_string(V) +
                                 ": no prefill specialization (available: " +
                                 available + ")"};
  });
  return nullptr;
}

const PrefillVariant *choosePrefillVariant(const PrefillVariant *variants,
                                           int count, int64_t K, int64_t V,
                                           int64_t N, int64_t HV, int sms,
                                           int64_t T, int64_t maxSeqlen) {
  int64_t busy = maxSeqlen > 0 ? std::clamp<int64_t>(T / maxSeqlen, 1, N) : N;
  const PrefillVariant *last = nullptr;
  for (int i = 0; i < count; ++i) {
    const PrefillVariant &c = variants[i];
    if (c.K != K || c.V != V)
      continue;
    last = &c;
    // Half a wave suffices (a quarter for some): one wave of wide blocks
    // beats two of narrow ones (a narrow block is not twice as fast;
    // measured on the H200).
    if (4 * busy * HV * int64_t(c.valueTiles) >= c.minBlocksPerSM * int64_t(sms))
      return &c;
  }
  return last;
}

const PrefillVariant *chooseOverlapVariant(const PrefillVariant *variants,
                                           int count, int64_t K, int64_t V,
                                           int64_t N, int64_t HV, int sms,
                                           int forced) {
  if (forced < 0)
    return nullptr;
  for (int i = 0; i < count; ++i) {
    const PrefillVariant &c = variants[i];
    if (c.K != K || c.V != V || c.overlapBlocksPerSM <= 0 || !c.queue)
      continue;
    // Every recur block needs an SM of its own beside chunks' blocks.
    if (forced > 0 || 4 * N * HV * int64_t(c.valueTiles) <= c.overlapBlocksPerSM * int64_t(sms))
      return &c;
  }
  return nullptr;
}

const PrefillVariant *chooseSharedOverlapVariant(const PrefillVariant *variants,
                                                 int count, int64_t K, int64_t V,
                                                 int64_t N, int64_t HV, int64_t T,
                                                 int sms, int forced) {
  if (forced < 0 || N <= 0)
    return nullptr;
  for (int i = 0; i < count; ++i) {
    const PrefillVariant &c = variants[i];
    if (c.K != K || c.V != V || c.overlapBlocksPerSM <= 0 || !c.queue || !c.recurShared)
      continue;
    if (forced > 0)
      return &c;
    int64_t grid = N * HV * int64_t(c.valueTiles);
    if (4 * grid <= c.sharedQuartersPerSM * int64_t(sms) && T >= c.sharedMinTokens * N &&
        T <= c.sharedMaxTokens * N)
      return &c;
  }
  return nullptr;
}

std::string parsePrefillForce(const char *text, PrefillForce *force) {
  *force = PrefillForce{};
  if (!text || !*text)
    return "";
  force->text = text;
  static const struct {
    const char *name;
    PrefillForm form;
  } forms[] = {{"dispatch", PrefillForm::Dispatch},
               {"ordinary", PrefillForm::Ordinary},
               {"shared_recur", PrefillForm::SharedRecur},
               {"raw_qk", PrefillForm::RawQK},
               {"raw_qk_w", PrefillForm::RawQKW},
               {"overlap", PrefillForm::Overlap},
               {"overlap_shared", PrefillForm::OverlapShared},
               {"cp", PrefillForm::Segments}};
  std::string all(text);
  size_t comma = all.find(',');
  std::string name = all.substr(0, comma);
  bool known = false;
  for (const auto &f : forms)
    if (name == f.name) {
      force->form = f.form;
      known = true;
    }
  if (!known)
    return "unknown form '" + name +
           "' (forms: dispatch, ordinary, shared_recur, raw_qk, raw_qk_w, overlap, "
           "overlap_shared, cp)";
  std::string seen;
  while (comma != std::string::npos) {
    size_t next = all.find(',', comma + 1);
    std::string item = all.substr(comma + 1, next == std::string::npos ? std::string::npos
                                                                       : next - comma - 1);
    comma = next;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key != "tile" && key != "stages" && key != "tma" && key != "sms" && key != "segments")
      return "unknown setting '" + key + "' (settings: tile, stages, tma, sms, segments)";
    if (seen.find("," + key + ",") != std::string::npos)
      return "'" + key + "' given twice";
    seen += "," + key + ",";
    bool digits = !value.empty() && value.size() <= 6 &&
                  value.find_first_not_of("0123456789") == std::string::npos;
    long n = digits ? std::strtol(value.c_str(), nullptr, 10) : -1;
    if (key == "segments") {
      if (n < 2 || n > deltac_abi::kMaxSegments)
        return "segments=" + value + ": from 2 to " + std::to_string(deltac_abi::kMaxSegments);
      if (force->form != PrefillForm::Segments)
        return "segments: only the cp form splits sequences into segments";
      force->segments = int(n);
    } else if (key == "tile") {
      if (force->form == PrefillForm::Segments)
        return "tile: cp runs the V tile its kernels were built for";
      if (n < 8 || n > 256 || n % 8 != 0)
        return "tile=" + value + ": a V tile is a multiple of 8 from 8 to 256";
      force->valueTile = int(n);
    } else if (key == "stages") {
      if (n < 1 || n > 3)
        return "stages=" + value + ": recur's ring has 1, 2 or 3 stages";
      force->stages = int(n);
    } else if (key == "tma") {
      if (n != 0 && n != 1)
        return "tma=" + value + ": 0 (off) or 1 (required)";
      if (force->overlapped())
        return "tma: the overlapped launch's queue copies by cp.async, never by tensor maps";
      force->tma = int(n);
    } else {
      if (n < 1)
        return "sms=" + value + ": a positive number of SMs";
      if (!force->overlapped())
        return "sms: only the overlap forms leave SMs to recur";
      force->overlapSMs = int(n);
    }
  }
  return "";
}

bool useRawQK(const PrefillVariant &v, int64_t recurGrid, int sms, int forced) {
  if (!v.chunksRaw || forced < 0)
    return false;
  return forced > 0 || (sms > 0 && recurGrid >= sms);
}

bool useSharedRecur(int64_t recurGrid, int sms, int forced) {
  return forced >= 0 && sms > 0 && (forced > 1 || recurGrid < sms);
}

int64_t overlapSharedSMs(int64_t recurGrid, int sms) {
  return std::max<int64_t>(1, std::min<int64_t>({recurGrid, int64_t(sms), kMaxSharedSMs}));
}

int64_t overlapReservedSMs(int64_t recurGrid, int sms) {
  return std::max<int64_t>(1, std::min<int64_t>(recurGrid, sms / 2));
}

PrefillVariant forImages(const PrefillVariant &v, const std::string &chunksImage,
                         const std::string &recurImage) {
  PrefillVariant out = v;
  if (v.altTarget && chunksImage == v.altTarget) {
    out.chunksThreads = v.chunksAltThreads;
    out.smemChunks = v.smemChunksAlt;
  }
  if (v.altTarget && recurImage == v.altTarget) {
    out.recurThreads = v.recurAltThreads;
    out.smemRecur = v.smemRecurAlt;
    out.smemRecurStage = v.smemRecurAltStage;
  }
  return out;
}

int recurStages(const PrefillVariant &v, int64_t perBlock, int forced) {
  if (v.smemRecurStage == 0)
    return 2;
  // The deepest ring that fits a block. One stage (two blocks per SM when
  // the grid is over a wave) only when forced: since recur's warp roles,
  // one block with 3 stages beats two with 1 (H200, varlen 16K: 388 vs
  // 412 us).
  // One stage also where two do not fit (V tile 64 on an A100).
  int fits = int64_t(v.smemRecur) + v.smemRecurStage <= perBlock ? 3
             : int64_t(v.smemRecur) <= perBlock                    ? 2
                                                                   : 1;
  if (forced >= 1 && forced <= 3)
    return std::min(forced, fits);
  return fits;
}

unsigned recurSharedBytes(const PrefillVariant &v, int stages) {
  return unsigned(int64_t(v.smemRecur) + (stages - 2) * v.smemRecurStage);
}

namespace {
/// The variant of (K, V) with the context-parallel kernels, or null.
const PrefillVariant *segmentVariant(const PrefillVariant *variants, int count, int64_t K,
                                     int64_t V) {
  for (int i = 0; i < count; ++i)
    if (variants[i].K == K && variants[i].V == V && variants[i].recurCp)
      return &variants[i];
  return nullptr;
}

/// Loads c's chunks and recur, then its three context-parallel kernels;
/// `sameCode`: all five run the same target's code (their workspace layout
/// and launch values are that code's; every kind of code a library holds
/// has them, so a mismatch is only a forced target loading chunks' and
/// recur's code apart). False with `error` set where a load failed.
bool loadSegmentKernels(const PrefillVariant &c, bool *sameCode, std::string *error) {
  if (!c.chunks->load(error) || !c.recur->load(error))
    return false;
  *sameCode = c.chunks->imageTarget() == c.recur->imageTarget();
  for (Kernel *kernel : {c.recurCp, c.segmentChain, c.segmentCorrection}) {
    if (!kernel->load(error))
      return false;
    *sameCode = *sameCode && kernel->imageTarget() == c.recur->imageTarget();
  }
  return true;
}

deltac::Status checkAndLaunch(const PrefillVariant *variants, int count,
                              const deltac_prefill_args &a, void *stream) {
  deltac::Status status;
  const PrefillVariant *found =
      findPrefillVariant(variants, count, a.K, a.V, status);
  if (!found)
    return status;
  const PrefillVariant &v = *found;
  if (std::string e = checkDtypes(a.io_dtype, a.state_dtype, v.io, v.state);
      !e.empty())
    return invalid(e);
  if (a.N < 1 || a.N > (int64_t(1) << 30))
    return invalid("N = " + std::to_string(a.N) + " must lie in [1, 2^30]");
  if (a.T < 0 || a.T > (int64_t(1) << 40))
    return invalid("T = " + std::to_string(a.T) + " must lie in [0, 2^40]");
  if (std::string e = checkScale(a.scale); !e.empty())
    return invalid(e);
  // The longest sequence holds at least the mean and at most all tokens.
  if (a.max_seqlen != 0 &&
      (a.max_seqlen < 0 || a.max_seqlen > a.T ||
       a.max_seqlen < (a.T + a.N - 1) / a.N))
    return invalid("max_seqlen = " + std::to_string(a.max_seqlen) +
                   " is not the length of a longest sequence of T = " +
                   std::to_string(a.T) + " tokens in N = " +
                   std::to_string(a.N) + " (0: unknown)");
  if (!a.cu_seqlens && a.T % a.N != 0)
    return invalid("T = " + std::to_string(a.T) + " must be a multiple of "
                   "N = " + std::to_string(a.N) + " without cu_seqlens");
  if (std::string e = checkHeads(a.H, a.HV); !e.empty())
    return invalid(e);
  if (std::string e = checkSizes(v, a.T, a.N, a.HV); !e.empty())
    return invalid(e);
  int64_t slots = a.slots == 0 ? a.N : a.slots;
  if (slots < 1)
    return invalid("slots = " + std::to_string(a.slots) +
                   " must be positive (or 0 for N)");
  // Without indices sequence n reads row n (initial_state) and writes row
  // n (final_state, output indices null: the row read).
  bool readsRowN = a.initial_state && !a.initial_state_indices;
  bool writesRowN =
      a.final_state && !a.output_state_indices && !a.initial_state_indices;
  if ((readsRowN || writesRowN ||
       (!a.initial_state_indices && !a.output_state_indices)) &&
      slots < a.N)
    return invalid("slots = " + std::to_string(slots) + " is below N = " +
                   std::to_string(a.N) + " (without indices, sequence n "
                   "uses row n)");
  for (auto [name, p] : {std::pair<const char *, const void *>{"q", a.q},
                         {"k", a.k},
                         {"v", a.v},
                         {"o", a.o},
                         {"beta", a.beta},
                         {"workspace", a.workspace}})
    if (std::string e = needPointer(name, p); !e.empty())
      return invalid(e);
  if (!a.error_flag)
    return invalid("error_flag must not be null");
  // Index arrays: int32, or int64 with indices_i64.
  const int64_t indexBytes = a.indices_i64 ? 8 : 4;
  const char *indexType = a.indices_i64 ? "int64" : "int32";
  // The options the spec leaves to the call, and so the gate form it runs.
  CallForm form;
  if (deltac::Status s = callForm(v, a, form); !s.ok())
    return s;
  const GateKind gate = form.gate;
  const int64_t gBytes = form.gateBytes;
  const int64_t betaBytes = a.beta_f32 ? 4 : dtypeBytes(v.io);
  // Natural alignment of what the kernels load one element at a time.
  for (std::string e :
       {needAligned("g", a.g, gBytes, gBytes == 4 ? "f32" : "the io dtype"),
        needAligned("A_log", a.A_log, 4, "f32"),
        needAligned("dt_bias", a.dt_bias, 4, "f32"),
        needAligned("initial_state_indices", a.initial_state_indices,
                    indexBytes, indexType),
        needAligned("output_state_indices", a.output_state_indices,
                    indexBytes, indexType),
        needAligned("error_flag", a.error_flag, 4, "int32")})
    if (!e.empty())
      return invalid(e);
  // dt_bias may be null (0: FLA's dt_bias=None).
  // A gate by call's kernels read a null log g as 0 (no decay).
  if (std::string e = checkGateInputs(gate, a.g, a.A_log, a.dt_bias, a.bounded_gate,
                                      a.lower_bound, /*nullLogGate=*/v.gate == GateKind::Call);
      !e.empty())
    return invalid(e);
  for (auto [name, p] :
       {std::pair<const char *, const void *>{"initial_state",
                                              a.initial_state},
        {"final_state", a.final_state},
        {"cu_seqlens", a.cu_seqlens}})
    if (p && !aligned16(p))
      return invalid(std::string(name) + " must be 16-byte aligned");
  int64_t need = prefillWorkspaceBytes(v, a.T, a.N, a.HV);
  if (a.workspace_bytes < need)
    return invalid("workspace_bytes = " + std::to_string(a.workspace_bytes) +
                   " is below the " + std::to_string(need) +
                   " bytes this call needs (prefill_workspace_bytes)");
  int64_t ioBytes = dtypeBytes(v.io);
  int64_t multiple = 16 / ioBytes;
  int64_t qs, ks, vs, os;
  for (std::string e :
       {tokenStride("q_stride", a.q_stride, a.H * v.K, multiple, qs),
        tokenStride("k_stride", a.k_stride, a.H * v.K, multiple, ks),
        tokenStride("v_stride", a.v_stride, a.HV * v.V, multiple, vs),
        tokenStride("o_stride", a.o_stride, a.HV * v.V, multiple, os)})
    if (!e.empty())
      return invalid(e);
  // No element offset a kernel forms may wrap: every tensor's extent fits
  // 2^48 bytes.
  const int64_t stateBytes = dtypeBytes(v.state);
  // Slots of both state tensors slot_stride elements apart (a slot may hold
  // more than one state: vLLM's hybrid cache).
  int64_t slotStride = 0;
  if (std::string e = checkSlotStride(a.slot_stride, a.HV * v.K * v.V, stateBytes,
                                      slotStride);
      !e.empty())
    return invalid(e);
  for (std::string e :
       {checkExtent("q", {a.T, qs, ioBytes}), checkExtent("k", {a.T, ks, ioBytes}),
        checkExtent("v", {a.T, vs, ioBytes}), checkExtent("o", {a.T, os, ioBytes}),
        checkExtent("g", {a.T, a.HV, perChannel(gate) ? v.K : 1, gBytes}),
        checkExtent("beta", {a.T, a.HV, betaBytes}),
        checkExtent("the states (slots * slot_stride)",
                    {slots, slotStride, stateBytes})})
    if (!e.empty())
      return invalid(e);
  int32_t ckEvery = 1;
  // The call keeps state checkpoints (either published form).
  const bool keeps = a.checkpoints || a.checkpoint_starts;
  if (keeps && v.K > deltac_abi::kCheckpointMaxK)
    return {DELTAC_UNSUPPORTED, "state checkpoints need K <= " +
                                    std::to_string(deltac_abi::kCheckpointMaxK) + " (K = " +
                                    std::to_string(v.K) +
                                    ": its recur has no registers left for them)"};
  if (std::string e = checkCheckpoints(v, a, ckEvery); !e.empty())
    return invalid(e);
  // Context parallelism across ranks (deltac_api.h, cp_phase).
  if (a.cp_phase < 0 || a.cp_phase > 2)
    return invalid("cp_phase = " + std::to_string(a.cp_phase) +
                   " must be 0 (an ordinary call), 1 or 2");
  if (a.cp_segments < 0 || a.cp_segments > deltac_abi::kMaxSegments)
    return invalid("cp_segments = " + std::to_string(a.cp_segments) + " must lie in [0, " +
                   std::to_string(deltac_abi::kMaxSegments) + "] (0: chosen)");
  if (a.cp_phase == 0 && (a.cp_transfer || a.cp_segments))
    return invalid("cp_transfer and cp_segments are for cp_phase 1 and 2 (cp_phase is 0)");
  if (a.cp_phase == 1 && !a.cp_transfer)
    return invalid("cp_transfer must not be null in cp_phase 1 (it receives the transfers)");
  if (a.cp_phase == 1 && !aligned16(a.cp_transfer))
    return invalid("cp_transfer must be 16-byte aligned");
  if (a.cp_phase != 0 && a.T == 0)
    return invalid("T = 0: a cp_phase call needs tokens (an empty rank's transfer is the "
                   "identity: M = I, b = 0)");
  if (a.cp_phase != 0 && keeps)
    return {DELTAC_UNSUPPORTED, "cp_phase calls keep no state checkpoints"};
  if (a.debug_checks)
    if (deltac::Status s = checkDeviceData(a, v, slots, stream); !s.ok())
      return s;
  if (a.T == 0 && !a.final_state)
    return {}; // nothing to compute or write
  // DELTAC_PREFILL_FORCE (docs/host-api.md): a request that is no valid
  // one, or that this library or device cannot run, refuses the call
  // before anything is launched.
  const PrefillForce &force = forceSetting().force;
  if (!forceSetting().error.empty())
    return invalid("DELTAC_PREFILL_FORCE=" + force.text + ": " + forceSetting().error);
  auto refuse = [&](const std::string &why) {
    return deltac::Status{DELTAC_UNSUPPORTED, "DELTAC_PREFILL_FORCE=" + force.text + ": " + why +
                                                  " for K = " + std::to_string(a.K) +
                                                  ", V = " + std::to_string(a.V)};
  };
  bool dispatch = force.form == PrefillForm::Dispatch;
  // The dispatch table: the SM count only matters when a predicate asks
  // (the table's, or the overlapped launch's where the library has it).
  int sms = 0;
  std::string error;
  for (int i = 0; i < count && sms == 0; ++i)
    if (variants[i].K == a.K && variants[i].V == a.V &&
        (variants[i].minBlocksPerSM > 0 ||
         (variants[i].overlapBlocksPerSM > 0 && variants[i].queue && programmaticLaunches())) &&
        (sms = multiprocessorCount(&error)) == 0)
      return {DELTAC_CUDA_ERROR, error};
  const PrefillVariant *chosen =
      choosePrefillVariant(variants, count, a.K, a.V, a.N, a.HV, sms, a.T, a.max_seqlen);
  // recur's grid for a variant: a block per (sequence, value head, V tile).
  auto recurGrid = [&](const PrefillVariant &c) { return a.N * a.HV * int64_t(c.valueTiles); };
  // Context parallelism (PrefillVariant::recurCp, chooseSegments): where
  // the device runs the code that has it and the call keeps no
  // checkpoints; forced by cp, never taken under the other forms.
  int segments = 0;
  bool forcedSegments = force.form == PrefillForm::Segments;
  std::string noSegments = "the library has no context-parallel kernels";
  if (a.cp_phase != 0) {
    // A rank's phase: the cp kernels whatever the dispatch says (a forced
    // form other than cp cannot run it), cp_segments or chosen.
    if (!dispatch && !forcedSegments)
      return refuse("a cp_phase call runs only the context-parallel form");
    const PrefillVariant *c = segmentVariant(variants, count, a.K, a.V);
    if (!c)
      return {DELTAC_UNSUPPORTED, "cp_phase: the library has no context-parallel kernels for "
                                  "K = " + std::to_string(a.K) + ", V = " + std::to_string(a.V) +
                                  " (a spec with chunk 64 and K <= 128)"};
    if (sms == 0 && (sms = multiprocessorCount(&error)) == 0)
      return {DELTAC_CUDA_ERROR, error};
    int n = a.cp_segments > 0                          ? a.cp_segments
            : forcedSegments && force.segments > 0     ? force.segments
                                                       : chooseRankSegments(*c, a.N, a.HV, sms);
    if (n == 0 || a.N * a.HV * n > deltac_abi::prefillSegmentSlots(a.N, a.HV))
      return {DELTAC_UNSUPPORTED, "cp_phase: N * HV * segments = " +
                                      std::to_string(a.N * a.HV * std::max(n, 1)) + " exceeds " +
                                      std::to_string(deltac_abi::prefillSegmentSlots(a.N, a.HV)) +
                                      " transfer slots"};
    bool sameCode = false;
    if (!loadSegmentKernels(*c, &sameCode, &error))
      return {DELTAC_CUDA_ERROR, error};
    if (!sameCode)
      return {DELTAC_UNSUPPORTED, "cp_phase: chunks and recur loaded different targets' code "
                                  "(a forced target?): the context-parallel kernels need one"};
    segments = n;
    chosen = c;
  } else if ((dispatch || forcedSegments) && !keeps && a.T > 0) {
    if (const PrefillVariant *c = segmentVariant(variants, count, a.K, a.V)) {
      if (sms == 0 && (sms = multiprocessorCount(&error)) == 0)
        return {DELTAC_CUDA_ERROR, error};
      int n = forcedSegments && force.segments > 0
                  ? force.segments
                  : chooseSegments(*c, a.N, a.HV, sms, a.T, forcedSegments ? 0 : a.max_seqlen);
      if (forcedSegments && n == 0)
        n = 2;
      noSegments = "N * HV * segments exceeds " + std::to_string(deltac_abi::kMaxSegmentHeads);
      if (n >= 2 && a.N * a.HV * n <= deltac_abi::prefillSegmentSlots(a.N, a.HV)) {
        bool sameCode = false;
        if (!loadSegmentKernels(*c, &sameCode, &error))
          return {DELTAC_CUDA_ERROR, error};
        noSegments = "chunks and recur loaded different targets' code";
        // Unforced, only where the tile-64 ring has two stages or more in
        // the code loaded: the split was measured with them (sm_90a's
        // code; sm_80's forced onto an H200). An A100's sm_80 code has one
        // stage there, not measured: it keeps the ordinary launch.
        int ring = 2;
        PrefillVariant loaded = forImages(*c, c->chunks->imageTarget(), c->recur->imageTarget());
        if (!forcedSegments && loaded.smemRecurStage > 0) {
          int perBlock = maxSharedPerBlock(&error);
          if (perBlock == 0)
            return {DELTAC_CUDA_ERROR, error};
          ring = recurStages(loaded, perBlock, 0);
        }
        if (sameCode && ring >= 2) {
          segments = n;
          chosen = c;
        }
      }
    }
  }
  if (forcedSegments && segments == 0 && a.T > 0)
    return refuse(keeps ? "context parallelism keeps no state checkpoints" : noSegments);
  // The overlapped launch (chooseOverlapVariant), where the device runs the
  // code that has it and programmatic launches are on; forced by the
  // overlap forms, never taken under the others.
  int forcedOverlap = force.overlapped() ? 1 : dispatch ? 0 : -1;
  // The shared overlapped launch (PrefillVariant::recurShared,
  // chooseSharedOverlapVariant) where the other is not taken: each recur
  // block shares an SM with one queue block, R = recur's grid SMs (at most
  // all, and kMaxSharedSMs), `overlap` = -R, two ring stages.
  bool forcedShare = force.form == PrefillForm::OverlapShared;
  // The shared recur keeps no state checkpoints (PrefillCheckpoints.cpp):
  // a call with them never takes it, and a request for it is refused.
  if (keeps && (forcedShare || force.form == PrefillForm::SharedRecur))
    return refuse("the shared recur keeps no state checkpoints (its chain has no registers "
                  "for them)");
  // A forced V tile holds for the overlapped launch too.
  auto tileFits = [&](const PrefillVariant *c) {
    return c && (force.valueTile == 0 || int64_t(c->valueTiles) * force.valueTile == a.V);
  };
  bool sharedOverlap = false;
  int64_t overlapSMs = 0;
  if (programmaticLaunches() && segments == 0) {
    const PrefillVariant *o = force.form == PrefillForm::OverlapShared
                                  ? nullptr
                                  : chooseOverlapVariant(variants, count, a.K, a.V, a.N, a.HV,
                                                         sms, forcedOverlap);
    bool share = false;
    if (!o && !keeps)
      share = (o = chooseSharedOverlapVariant(
                   variants, count, a.K, a.V, a.N, a.HV, a.T, sms,
                   forcedShare ? 1 : forcedOverlap < 0 || force.form == PrefillForm::Overlap
                                     ? -1
                                     : 0)) != nullptr;
    if (!tileFits(o))
      o = nullptr;
    if (o) {
      // The queue kernel has only the code of altTarget (sm_90a): load it
      // only where recur (and chunks) run that code.
      if (!o->chunks->load(&error) || !o->recur->load(&error))
        return {DELTAC_CUDA_ERROR, error};
      // The shared recur, too, only where chunks and recur run that code
      // (it has no image for another target: an A100 must not try it).
      bool altCode = o->altTarget && o->chunks->imageTarget() == o->altTarget &&
                     o->recur->imageTarget() == o->altTarget;
      if (altCode && share && !o->recurShared->load(&error))
        return {DELTAC_CUDA_ERROR, error};
      if (altCode && (!share || o->recurShared->imageTarget() == o->altTarget)) {
        if (!o->queue->load(&error))
          return {DELTAC_CUDA_ERROR, error};
        chosen = o;
        sharedOverlap = share;
        overlapSMs = share ? overlapSharedSMs(recurGrid(*o), sms)
                           : overlapReservedSMs(recurGrid(*o), sms);
        // Tuning aid: sms=n leaves n SMs to recur.
        if (force.overlapSMs > 0)
          overlapSMs = sharedOverlap ? overlapSharedSMs(force.overlapSMs, sms)
                                     : std::min<int64_t>(force.overlapSMs, sms - 1);
      }
    }
  }
  // A forced overlap form where no such launch can run (the code loaded
  // for this GPU has no queue form or shared recur for the call, none of
  // the forced tile, or programmatic launches are off): refused, not run
  // as the ordinary launch.
  if (force.overlapped() && (overlapSMs == 0 || sharedOverlap != forcedShare))
    return refuse(std::string("no ") + (forcedShare ? "shared " : "") +
                  "overlapped launch (the code loaded for this GPU has no queue form" +
                  (forcedShare ? " or shared recur" : "") +
                  (force.valueTile ? " of that V tile" : "") + ", or DELTAC_PDL=0)");
  // A forced V tile: that recur variant whatever the table says; one the
  // library lacks is refused, never silently ignored.
  if (force.valueTile > 0 && overlapSMs == 0 && segments == 0) {
    const PrefillVariant *tiled = nullptr;
    for (int i = 0; i < count; ++i)
      if (variants[i].K == a.K && variants[i].V == a.V && tileFits(&variants[i]))
        tiled = &variants[i];
    if (!tiled)
      return refuse("the library has no recur of V tile " + std::to_string(force.valueTile));
    chosen = tiled;
  }

  // shared_recur takes the variant (of the forced tile) that has the
  // shared recur, so that every call runs it.
  for (int i = 0; i < count && force.form == PrefillForm::SharedRecur; ++i)
    if (variants[i].K == a.K && variants[i].V == a.V && variants[i].recurShared &&
        tileFits(&variants[i])) {
      chosen = &variants[i];
      break;
    }

  // chunks' and recur's block sizes and shared memory are those of the
  // code loaded: one target's may differ from the table's (the wgmma forms
  // on sm_90a). recur must read the workspace in the layout chunks wrote:
  // the two list the same targets, so they load the same one; a pair that
  // did not is refused rather than launched.
  if (!chosen->chunks->load(&error) || !chosen->recur->load(&error))
    return {DELTAC_CUDA_ERROR, error};
  if (chosen->chunks->imageTarget() != chosen->recur->imageTarget())
    return {DELTAC_UNSUPPORTED, "prefill: chunks loaded the " + chosen->chunks->imageTarget() +
                                   " code and recur the " + chosen->recur->imageTarget() +
                                   " code; their workspace layouts differ"};
  PrefillVariant launched =
      forImages(*chosen, chosen->chunks->imageTarget(), chosen->recur->imageTarget());
  int perBlock = 0;
  if (launched.smemRecurStage > 0 && (perBlock = maxSharedPerBlock(&error)) == 0)
    return {DELTAC_CUDA_ERROR, error};
  // The shared launch's recur in the ordinary launch too, where
  // useSharedRecur says (beside chunks, where the raw form is not taken):
  // it fits an SM beside one chunks block, so its blocks start while
  // chunks' last blocks run (T = 512: 8.5 % faster on an H100, 5.6 % on
  // an H200).
  // Forced: shared_recur takes it wherever the library has it (the variant
  // chosen above), the other forms never.
  int recurSharedAlone = force.form == PrefillForm::SharedRecur ? 2 : dispatch ? 0 : -1;
  int forcedRaw = force.rawQK() ? 1 : dispatch ? 0 : -1;
  bool sharedRecur = sharedOverlap;
  if (overlapSMs == 0 && segments == 0 && forcedRaw <= 0 && !keeps && chosen->recurShared &&
      chosen->altTarget && chosen->recur->imageTarget() == chosen->altTarget &&
      useSharedRecur(recurGrid(*chosen), sms, recurSharedAlone)) {
    if (!chosen->recurShared->load(&error))
      return {DELTAC_CUDA_ERROR, error};
    sharedRecur = chosen->recurShared->imageTarget() == chosen->altTarget;
  }
  // shared_recur where the code loaded for this GPU has no shared recur
  // for the call (another target's code, or a spec without the sm_90a
  // forms): refused, not replaced by the ordinary recur.
  if (force.form == PrefillForm::SharedRecur && !sharedRecur)
    return refuse("the code loaded for this GPU has no shared-launch recur");
  // The recur ring's depth (recurStages; `stages` forces one, so every
  // depth can be tested and timed on one GPU). Beside a queue block the
  // shared launch's recur has room for two stages.
  int stages = recurStages(launched, perBlock, force.stages);
  if (sharedRecur)
    stages = std::min(stages, 2);
  if (force.stages > 0 && stages != force.stages)
    return refuse("recur's ring has room for " + std::to_string(stages) + " stage(s) here, not " +
                  std::to_string(force.stages));
  unsigned recurSmem = recurSharedBytes(launched, stages);

  // The order of prefillKernelParams() (codegen/gpu/prefill/PrefillPlan.cpp).
  const void *q = a.q, *k = a.k, *vv = a.v, *g = a.g, *beta = a.beta,
             *aLog = a.A_log, *dt = a.dt_bias, *s0 = a.initial_state,
             *inIdx = a.initial_state_indices,
             *outIdx = a.output_state_indices, *cu = a.cu_seqlens;
  void *o = a.o, *sf = a.final_state, *work = a.workspace,
       *flag = a.error_flag;
  // Bit 0: cu_seqlens is int64; bit 1: the index arrays are.
  int32_t cuI64 = (a.cu_seqlens_i64 ? 1 : 0) | (a.indices_i64 ? 2 : 0);
  int64_t T = a.T;
  int32_t N = (int32_t)a.N, H = (int32_t)a.H, HV = (int32_t)a.HV;
  int32_t chunks = (int32_t)maxChunks(v, a.T, a.N);
  float scale = a.scale;
  int32_t overlap = (int32_t)(sharedOverlap ? -overlapSMs : overlapSMs);
  // recur reads raw q and k, after chunks' `_chunks_raw` form (factors
  // instead of Qg and Kd), where its grid fills a wave and both kernels
  // run altTarget's code; never overlapped. Forced by raw_qk / raw_qk_w,
  // never taken under the other forms.
  int32_t qkRaw = 0;
  if (overlapSMs == 0 && segments == 0 && !sharedRecur && chosen->altTarget &&
      chosen->recur->imageTarget() == chosen->altTarget &&
      useRawQK(*chosen, recurGrid(*chosen), sms, forcedRaw)) {
    if (!chosen->chunksRaw->load(&error))
      return {DELTAC_CUDA_ERROR, error};
    qkRaw = chosen->chunksRaw->imageTarget() == chosen->altTarget ? 1 : 0;
    // qk_raw = 2: chunks_raw writes A_w (C x C) instead of W (C x K) and
    // recur computes W = A_w K from the raw k rows it copies anyway: 8 KiB
    // less written and read per (chunk, value head) at K = 128 (varlen
    // 16K on an H100, session 22: with TMA copies 0.4979 -> 0.4905 ms).
    // raw_qk_w keeps chunks_raw's W (tests, A/B).
    if (qkRaw && force.form != PrefillForm::RawQKW)
      qkRaw = 2;
  }
  if (force.rawQK() && qkRaw == 0)
    return refuse("the code loaded for this GPU has no raw q/k recur");
  // sm_90a's warpgroup chunks and the raw form's recur take the q, k and v
  // rows by TMA tensor copies where the host can describe them (tensor
  // maps: boxes of 64 columns, 1 head and a chunk of tokens) instead of 16
  // cp.async per thread and image (an H100, session 22: varlen 16K 3.3 %,
  // T = 4K 2.3 % faster). On wherever the maps can be encoded (the driver
  // has cuTensorMapEncodeTiled; base and token strides 16-byte aligned:
  // tensorMapUsable). tma=0 turns it off, tma=1 refuses a call whose maps
  // are not passed (tests: a silent fallback would leave the TMA path
  // untested). Only altTarget's code reads the maps, and not in the
  // overlapped launch (the queue form copies by cp.async).
  int tmaMode = force.tma < 0 ? 1 : force.tma == 0 ? 0 : 2;
  TensorMap qMap{}, kMap{}, vMap{};
  int32_t tma = 0;
  if (tmaMode > 0 && overlapSMs == 0 && chosen->altTarget && v.K % 64 == 0 &&
      v.V % 64 == 0 &&
      (qkRaw || chosen->chunks->imageTarget() == chosen->altTarget)) {
    bool bf16 = v.io == DELTAC_BF16;
    unsigned rows = unsigned(v.chunk);
    tma = encodeRowsMap(&qMap, a.q, bf16, a.T, a.H, v.K, qs, 64, rows) &&
                  encodeRowsMap(&kMap, a.k, bf16, a.T, a.H, v.K, ks, 64, rows) &&
                  encodeRowsMap(&vMap, a.v, bf16, a.T, a.HV, v.V, vs, 64, rows)
              ? 1
              : 0;
  }
  if (!tma && tmaMode == 2 && a.T > 0) // T = 0: no chunk to copy
    return refuse("the tensor maps of q, k and v could not be encoded or the code loaded "
                  "reads none");
  const PrefillParams values{q,  k,     vv,    o,  g,      beta,   aLog, dt,    s0,
                             sf, inIdx, outIdx, cu, work,  flag,   cuI64, T,    N,
                             H,  HV,    chunks, qs, ks,    vs,     os,    slots, scale,
                             overlap, qkRaw, tma, qMap, kMap, vMap,
                             kernelLowerBound(a.bounded_gate, a.lower_bound), slotStride,
                             a.checkpoints, a.checkpoint_starts, ckEvery,
                             keeps ? a.checkpoint_rows : 0,
                             a.checkpoint_dtype == DELTAC_F32 ? 1 : 0,
                             a.beta_f32 ? 1 : 0,
                             segments,
                             a.cp_phase,
                             a.cp_phase == 1 ? a.cp_transfer : nullptr,
                             form.bits};
  ParamPack pack;
  packPrefillParams(values, pack);
  void **params = pack.args();
  // recur's sm_90 code is a programmatic dependent of chunks: it may start
  // while chunks' last blocks run, and waits for their results itself
  // (PrefillPlan::gridDependency). Only that code may be launched so.
  bool dependent = chosen->recur->loadedCapability() >= 90;
  // Overlapped (PrefillOverlap.cpp): the queue and flags start at zero, and
  // chunks' queue form runs as a grid of every block the SMs hold at once,
  // whose blocks take items from the queue (those on the SMs left to recur
  // leave).
  unsigned chunksGrid = (unsigned)(chunks * a.HV);
  Kernel *chunksKernel = overlapSMs > 0 ? chosen->queue
                         : qkRaw         ? chosen->chunksRaw
                                         : chosen->chunks;
  if (overlapSMs > 0) {
    int64_t regionBytes = 0;
    int64_t at = prefillOverlapRegion(v, a.T, a.N, a.HV, &regionBytes);
    int perSM = maxSharedPerSM(&error);
    if (perSM == 0)
      return {DELTAC_CUDA_ERROR, error};
    // Each block also takes 1 KiB of shared memory the system reserves.
    int64_t perSMBlocks = std::clamp<int64_t>(
        perSM / (int64_t(chosen->smemQueue) + 1024), 1, 2048 / launched.chunksThreads);
    // Shared: every SM's blocks, however few the items, so that each
    // shared SM keeps its one and the others their full count (the extra
    // blocks find the queue empty and leave).
    chunksGrid = (unsigned)(sharedOverlap ? perSMBlocks * sms
                                          : std::min<int64_t>(chunksGrid, perSMBlocks * sms));
    if (!zeroAsync(reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(a.workspace) +
                                            uintptr_t(at)),
                   size_t(regionBytes / 4), stream,
                   &error))
      return {DELTAC_CUDA_ERROR, error};
  }
  if (segments > 0) {
    // chunks, then the segments side by side (recurCp: the first
    // segment's value tiles, every other one's value and transfer tiles;
    // the grid also holds the first segment's transfer slots, which leave
    // at once), the chain of transfers, the correction. Across ranks,
    // phase 1 stops after the chain, which composes the rank's transfer on
    // K more columns; phase 2 runs only the chain, from the entering
    // state, and the correction of every segment.
    bool transfers = a.cp_phase != 2, corrects = a.cp_phase != 1;
    int64_t cpGrid = a.N * a.HV * segments * segmentTiles(*chosen);
    int64_t chainColumns = a.cp_phase == 1 ? v.V + v.K : v.V;
    unsigned t = chosen->segmentThreads;
    if ((a.N > kPrefillInlineSequences &&
         !chosen->prep->launch(1, 1, 1, chosen->threads, stream, params, &error,
                               chosen->smemPrep)) ||
        (transfers &&
         (!chosen->chunks->launch(chunksGrid, 1, 1, launched.chunksThreads, stream, params,
                                  &error, launched.smemChunks) ||
          !chosen->recurCp->launch((unsigned)cpGrid, 1, 1, launched.recurThreads, stream,
                                   params, &error, recurSmem, dependent))) ||
        !chosen->segmentChain->launch(
            (unsigned)(a.N * a.HV * (chainColumns / deltac_abi::kSegmentChainColumns)), 1, 1, t,
            stream, params, &error, chosen->smemSegmentChain) ||
        (corrects && !chosen->segmentCorrection->launch(chunksGrid, 1, 1, t, stream, params,
                                                        &error,
                                                        chosen->smemSegmentCorrection)))
      return {DELTAC_CUDA_ERROR, error};
    return {};
  }
  if ((a.N > kPrefillInlineSequences &&
       !chosen->prep->launch(1, 1, 1, chosen->threads, stream, params, &error,
                             chosen->smemPrep)) ||
      !chunksKernel->launch(chunksGrid, 1, 1, launched.chunksThreads, stream, params, &error,
                            overlapSMs > 0 ? chosen->smemQueue : launched.smemChunks, false,
                            sharedRecur) ||
      !(sharedRecur ? chosen->recurShared : chosen->recur)
           ->launch((unsigned)recurGrid(*chosen), 1, 1,
                            launched.recurThreads, stream, params, &error,
                            recurSmem, dependent, sharedRecur))
    return {DELTAC_CUDA_ERROR, error};
  return {};
}

} // namespace

deltac::Status runPrefill(const PrefillVariant *variants, int count,
                          const deltac_prefill_args &a, void *stream) {
  beginCall();
  return guarded([&] { return checkAndLaunch(variants, count, a, stream); });
}

void packPrefillParams(const PrefillParams &p, ParamPack &pack) {
  pack.add("q", &p.q);
  pack.add("k", &p.k);
  pack.add("v", &p.v);
  pack.add("o", &p.o);
  pack.add("g", &p.g);
  pack.add("beta", &p.beta);
  pack.add("a_log", &p.aLog);
  pack.add("dt_bias", &p.dtBias);
  pack.add("initial_state", &p.initialState);
  pack.add("final_state", &p.finalState);
  pack.add("in_idx", &p.inIdx);
  pack.add("out_idx", &p.outIdx);
  pack.add("cu_seqlens", &p.cu);
  pack.add("work", &p.work);
  pack.add("error_flag", &p.flag);
  pack.add("cu_is_i64", &p.cuI64);
  pack.add("T", &p.T);
  pack.add("N", &p.N);
  pack.add("H", &p.H);
  pack.add("HV", &p.HV);
  pack.add("max_chunks", &p.maxChunks);
  pack.add("q_stride", &p.qStride);
  pack.add("k_stride", &p.kStride);
  pack.add("v_stride", &p.vStride);
  pack.add("o_stride", &p.oStride);
  pack.add("slots", &p.slots);
  pack.add("scale", &p.scale);
  pack.add("overlap", &p.overlap);
  pack.add("qk_raw", &p.qkRaw);
  pack.add("tma", &p.tma);
  pack.add("q_map", &p.qMap);
  pack.add("k_map", &p.kMap);
  pack.add("v_map", &p.vMap);
  pack.add("lower_bound", &p.lowerBound);
  pack.add("slot_stride", &p.slotStride);
  pack.add("checkpoints", &p.checkpoints);
  pack.add("checkpoint_starts", &p.checkpointStarts);
  pack.add("checkpoint_every", &p.checkpointEvery);
  pack.add("checkpoint_rows", &p.checkpointRows);
  pack.add("checkpoint_f32", &p.checkpointF32);
  pack.add("beta_f32", &p.betaF32);
  pack.add("segments", &p.segments);
  pack.add("cp_phase", &p.cpPhase);
  pack.add("cp_transfer", &p.cpTransfer);
  pack.add("options", &p.options);
}

const ParamInfo *prefillParamLayout(int *count) {
  static const PrefillParams values{};
  static ParamPack pack = [] {
    ParamPack p;
    packPrefillParams(values, p);
    return p;
  }();
  *count = pack.size();
  return pack.info();
}

} // namespace deltac_rt
