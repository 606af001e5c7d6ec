// device_gemm: the GEMM handed to the CUDA engine (cuda/engine/gemm_engine.cu) as plain data.
//
// sim/ never includes CUDA headers: gemm_device.cpp fills a DeviceGemm from the
// GemmSpec and the decoded operands (every model parameter read from the model's data,
// never from its name) and calls run_device_gemm(), which the CUDA engine defines when the
// build has CUDA and sim/gemm/gemm_device_stub.cpp defines (as an error) when it does not.
// Plain C++17 so that nvcc compiles it as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace fp8sim {

// An IEEE-style format the engine rounds into (an accumulator output, a C register, an
// output type): |v| = n * 2^(e - mantissa_bits), e >= min_exponent, e <= max_exponent.
struct DeviceFormat {
  int mantissa_bits = 23;
  int min_exponent = -126;  // smallest normal exponent
  int max_exponent = 127;   // exponent of the largest finite value
};

// The accumulator model (AccumulatorSpec) as numbers.
struct DeviceModel {
  int group = 32;          // products per fused step; 0: the whole chunk (exact model)
  int frac_bits = 13;
  int term_cut = 0;        // DeviceRounding
  int c_entry = 0;         // 0 join, 1 exact, 2 add (CEntry)
  int block = 0;           // products per instruction of chained steps (0: none)
  bool interleave = false;
  bool renormalise = false;
  bool exact = false;
  bool signed_zero = false; // a nonzero sum that rounds to zero keeps its sign
  DeviceFormat output;
  int output_rounding = 1; // DeviceRounding
  DeviceFormat c_register; // C enters in this format (fp32 for 8-bit-exponent outputs)
  bool c_register_fp32 = true;
  int c_min_exponent = -126;
  bool zero_on = false;    // a zero term (zero product, zero c joining) aligns at zero_exponent
  int zero_exponent = 0;   // (set only where it can change a step on the operands' formats)
};

// Rounding directions, numbered as fp8sim::Rounding (rne, rz, ru, rd, rna).
enum DeviceRounding : int { kRne = 0, kRz = 1, kRu = 2, kRd = 3, kRna = 4 };

// One GEMM (or batched dot product) on decoded operand values.
//   gemm:    D[m*N+n] = dot(A row m, B row n), M x N outputs.
//   batched: D[t] = dot(A row t, B row t), M outputs (N is 1).
// Scales of output (a_row, b_row) at K block kb: sa[a_bcast ? kb : a_row*a_cols + kb],
// sb[b_bcast ? kb : (b_row / b_div)*b_cols + kb] (kb = 0 when scale_block is 0).
struct DeviceGemm {
  DeviceModel model;
  // The fast step the host chose (sim/gemm/gemm_path.hpp's DeviceStep, from choose_gemm_path):
  // 0 none (reference steps), 1 float sums, 2 double sums. The engine never re-decides it.
  int fast_step = 0;
  int M = 0, N = 0, K = 0;
  bool batched = false;
  int promote_every = 0;     // 0: never
  bool scaled = false;
  bool scale_a_first = false;  // promotion: acc = fmaf(part * sa, sb, acc) (ScaleOrder::triton);
                               // else acc = fmaf(sa * sb, part, acc)
  int scale_block = 0;       // K elements per scale (0: one for all of K)
  int a_cols = 1, b_cols = 1, b_div = 1;
  bool a_bcast = false, b_bcast = false;
  DeviceFormat out_type;     // f32, bf16 or f16
  bool out_fp32 = true;
  // Operand formats: the alignment exponent of a nonzero finite value is
  // max(floor(log2|v|), *_align_min) (the unpacked format's when the model unpacks).
  int a_align_min = -6, b_align_min = -6;
  // Power-of-two block scales folded into the operands (sim/gemm/block_fold.hpp): A and B hold
  // v * s, sa and sb hold the scales s (the layout above, scale_block elements each, scaled
  // false: nothing is applied at promotion), and an element's alignment floor is
  // *_align_min + log2 s, as its exponent moved with its value (a subnormal element aligns
  // at its format's minimum normal exponent, moved by its scale).
  bool fold = false;
  // Block scales inside the MMA on group sums (kind::mxf4, kind::mxf4nvf4; group_sums_fit
  // holds): each step's products summed exactly in groups of group_sum, each sum times its
  // block's two scales (sa, sb in the layout above, scale_block elements each; scaled false),
  // aligned on their exponents, at least scale_min_exponent each. Operands, scales and C are
  // finite. 0: no group sums.
  int group_sum = 0;
  int scale_min_exponent = 0;
  // The tiled group-sum kernel (cuda/engine/gemm_engine_tiled_gs.cuh) runs where int8_groups:
  // every element of A is an integer of magnitude at most 127 times 2^a_unit (B: 2^b_unit),
  // each scale an integer of scale_mantissa_bits + 1 bits times a power of two (its exponent
  // in -128..127), and a group's sum times two such integers fits int32.
  bool int8_groups = false;
  int a_unit = 0, b_unit = 0, scale_mantissa_bits = 0;
  // Block scales inside the MMA applied by the reference step (sim's Engine::scaled_step:
  // fused_step_exponents with StepScales; cuda/engine/gemm_engine_scaled.cuh), for the
  // block-scaled models and operands the steps above do not take (fp32 or bf16 operands,
  // non-finite values, scales that do not fold): every step's terms are its products (or,
  // model_group_sum > 1, exact sums of model_group_sum products) times their blocks' scales
  // (sa, sb in the layout above, scale_block elements each; scaled false), aligned on their
  // exponents plus the scales' (at least scale_min_exponent each), in `lanes` lanes (at most
  // 8), c joining or (model c_entry add) added after. Where set, *step_errors (host) gets the
  // error the steps of the first output (in D's order) that raised one raised first along K
  // (a DeviceStepError; 0: none), the error the CPU engine throws on one thread.
  bool scaled_reference = false;
  int model_group_sum = 1;
  int lanes = 1;
  bool product_overflow = false;
  unsigned* step_errors = nullptr;
  const float* A = nullptr;  // M x K values (host memory)
  const float* B = nullptr;  // N x K (batched: M x K)
  const float* C = nullptr;  // one per output, or null
  const float* sa = nullptr;
  const float* sb = nullptr;
  std::size_t sa_size = 0, sb_size = 0;
  float* D = nullptr;        // one per output, values of out_type (host memory)
  // Resident GEMMs (gemm_resident): A_codes, B_codes, C and D are memory of the current
  // CUDA device, A and B are unset, and the engine decodes each code once through the
  // tables a_lut / b_lut (host, lut_size values: code -> value); a code >= lut_size is
  // reported as not a code of a_name / b_name. Scales stay in host memory.
  bool resident = false;
  const unsigned char* A_codes = nullptr;
  const unsigned char* B_codes = nullptr;
  const float* a_lut = nullptr;
  const float* b_lut = nullptr;
  int a_lut_size = 256, b_lut_size = 256;
  const char* a_name = "";
  const char* b_name = "";
  // Which columns of the resident codes this GEMM's K covers: element (r, k) of A (and B)
  // is code r * code_ld + code_k0 + k for k < code_cols, and +0 beyond (a zero-padded K
  // tail); code_ld 0 means K (the codes are exactly M x K). Split-K slices and kernels'
  // masked K tails read the caller's arrays in place this way.
  int code_ld = 0, code_k0 = 0, code_cols = 0;
};

// The errors of the reference step with block scales (DeviceGemm::scaled_reference):
// sim/accumulator/step.cpp throws them (the CPU engine rethrows the first as std::domain_error).
enum DeviceStepError : unsigned {
  kStepGroupSumInexact = 1,  // "a group sum of N products is not exact in a double"
  kStepTermBeyond128 = 2,    // "accumulator term beyond 128 bits"
  kStepBelowExactGrid = 4,   // "exact sum: value below the fixed-point grid"
};

// The log2 range of a run of block scales: the smallest and largest floor(log2 s) of its finite
// nonzero scales (lo > hi where there is none), and whether every scale is finite and nonzero.
struct ScaleLog2 {
  int lo = 1 << 30, hi = -(1 << 30);
  bool all_finite_nonzero = true;
};

// How the engine launches (tests vary it; results never depend on it).
struct DeviceLaunch {
  int kernel = 0;            // 0: fastest available; 1: one thread per output everywhere
  bool own_stream = false;   // run on a stream of its own instead of the default stream
  double* kernel_seconds = nullptr;  // where set: the kernels' time (CUDA events), no copies
  void* stream = nullptr;    // where set: this cudaStream_t (the caller's, e.g. torch's current
                             // stream), which overrides own_stream
  int device = -1;           // where >= 0: run on this CUDA device (resident operands' device)
  // The tiled kernels' K-parallel chunks (cuda/engine/gemm_engine_kpar.cuh): 0 where the tiles
  // alone cannot fill the GPU, 1 wherever the chunks allow it, -1 never.
  int k_parallel = 0;
  int k_group = 0;           // where > 0: at most this many chunks a pass (several passes)
  // Resident 8-bit codes (gemm_resident): 0 read in place by every kernel (the float tiled
  // kernel through tables in shared memory: no decoded copy and no prepared one), -1 decoded
  // to values once (and prepared for the float kernel's tiles).
  int codes = 0;
  // DeviceGemm's sa and sb are device memory already (gemm_resident's checked copies), not
  // host arrays to upload; where they fold into resident codes, their log2 ranges (A's, B's)
  // as check_scales_on_device found them.
  bool scales_on_device = false;
  ScaleLog2 scale_log2[2];
  // Resident codes already checked to be codes of their formats (gemm()'s bands check them as
  // they arrive: find_bad_codes_on_device): decoded through 256-entry tables (0 past the
  // format's codes) with no check of their own, so that a format of fewer than 256 codes does
  // not hold the host until its kernels are done (resident_on_device).
  bool codes_checked = false;
};

// The CUDA quantiser's deferred reports (scaling/device_quantize.hpp,
// DeviceQuantiseJob::deferred), in the order they were made, up to the first whose device
// work has not finished (wait: every one, waiting for them), are read and dropped; the first
// that found an element that is not finite throws std::invalid_argument, "x: value at index
// <i> is <v>" and where it was found. Cheap where none is pending (no CUDA call). Here, not
// with the quantiser, because a GEMM that takes such scales to the host checks them first
// (gemm_resident_scales_on_device).
void check_deferred_quantisations(bool wait);

// Runs g on the current CUDA device. Throws std::runtime_error("fp8sim was built without
// CUDA") in a build without CUDA, "no CUDA device" without a GPU.
void run_device_gemm(const DeviceGemm& g, const DeviceLaunch& launch = {});

// The library GEMM's reduction and epilogue on CUDA device memory (sim/gemm/gemm_split.cpp's
// reduce_slices and apply_epilogue, the same fp32 operations in the same order): D (M x N
// fp32) += part where part is set (a later split-K slice); then, where `finish`, each
// D[m, n] = out_type(scaled + bias[n]), scaled = D * (sa[0] * sb[0]) (scales 1: tensor) or
// (D * sb[n]) * sa[m] (scales 2: row), D itself (0: none).
struct DeviceEpilogue {
  int M = 0, N = 0;
  const float* part = nullptr;  // device, M x N
  bool finish = false;
  int scales = 0;
  const float* sa = nullptr;    // host: 1 (tensor) or M (row) values
  const float* sb = nullptr;    // host: 1 or N values
  bool scales_on_device = false;  // sa and sb are device memory (read there: no upload)
  const float* bias = nullptr;  // host: N values, or null
  DeviceFormat out_type;
  bool out_fp32 = true;
  float sa_value = 1, sb_value = 1;  // set by run_device_epilogue: tensor scales by value
};
void run_device_epilogue(const DeviceEpilogue& e, float* D, void* stream = nullptr,
                         int device = -1);

// Copies `bytes` between host memory and CUDA device memory (to_device: host -> device) on
// `stream` of CUDA device `device` (-1: the current one), after the work queued there, and
// returns when the copy is done; throws std::runtime_error as run_device_gemm does. Copies of
// kStagedBytes and more go through the library's pinned staging buffers (host memory is
// pageable; cuda/engine/host_staging.cu), as copy_device_async's whole copies do.
constexpr std::size_t kStagedBytes = std::size_t(8) << 20;
void copy_device(void* dst, const void* src, std::size_t bytes, bool to_device,
                 void* stream = nullptr, int device = -1);

// A copy queued on `stream` of the current device without waiting for it: `rows` rows of
// `width` bytes, `spitch` bytes apart in src and `dpitch` in dst (one row: a plain copy).
// Host memory may be pageable: CUDA then returns once it has read the source (to_device) or
// once the copy is done (from the device). Throws as run_device_gemm does.
void copy_device_async(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                       std::size_t width, std::size_t rows, bool to_device, void* stream);

// Work in bands on the current device, copies overlapping kernels (gemm()'s banded route,
// gemm/device_bands.hpp): for band i = 0 .. n - 1 in turn, in(i, stream) queues its uploads
// on the upload stream; run(i, stream) its kernels on one of two kernel streams, taken in
// turn, after those uploads (so that the end of one band's kernels overlaps the start of the
// next's); out(i, stream) its downloads on the download stream after its kernels, queued once
// band i + 1's kernels are (a download to pageable memory holds the host until it is done,
// while the GPU runs the next band). Where `checked` is set, every band's uploads and kernels
// are queued first, then checked(upload stream) runs (it may throw: then nothing has been
// downloaded), then the downloads, each after its band's kernels. Returns when every download
// is done. A callback's or CUDA's exception waits for everything queued, then propagates.
void run_device_bands(int n, const std::function<void(int, void*)>& in,
                      const std::function<void(int, void*)>& run,
                      const std::function<void(int, void*)>& out,
                      const std::function<void(void*)>& checked = {});

// Queues on `stream` (of the current device) a search of the n one-byte codes at `codes`
// (device memory) for those at or beyond `count` (not codes of a format of `count` codes): the
// smallest such index plus `base`, if smaller, goes to *first (device memory). No wait.
// Throws as run_device_gemm does.
void find_bad_codes_on_device(const std::uint8_t* codes, std::size_t n, unsigned count,
                              std::size_t base, unsigned long long* first, void* stream);

// The current CUDA device's number of streaming multiprocessors; throws as run_device_gemm
// does.
int device_sm_count();

// Whether the n floats at p (memory of CUDA device `device`, -1: the current one) are all
// finite, read after the work queued on `stream`; throws as run_device_gemm does.
bool device_all_finite(const float* p, std::size_t n, void* stream = nullptr, int device = -1);

// Block scales in device memory checked there (gemm_resident's group-sum and folded routes):
// the n floats at `scales`, each a value of the scale format where it is a NaN and nan_ok, or
// its float bits have 16 zero low bits and bit (bits >> 16) of `table` (kScaleTableWords
// words of host memory: bit i in word i / 32 at i % 32) is set; and the log2 ranges of the
// first `split` (A's) and of the rest (B's). Read after the work queued on `stream`; throws
// as run_device_gemm does.
constexpr std::size_t kScaleTableWords = 65536 / 32;
struct DeviceScaleCheck {
  std::size_t first_bad;  // the smallest index of a scale that is not a value (n: none)
  bool finite;            // every scale finite
  ScaleLog2 a, b;         // scales [0, split) and [split, n)
};
DeviceScaleCheck check_scales_on_device(const float* scales, std::size_t n, std::size_t split,
                                        const std::uint32_t* table, bool nan_ok,
                                        void* stream = nullptr, int device = -1);

// Memory of the current CUDA device (cudaMalloc / cudaFree), for callers without CUDA headers
// that hand gemm_resident operands on the device (benchmarks, tests); throws as
// run_device_gemm does. device_free(nullptr) does nothing.
void* device_malloc(std::size_t bytes, int device = -1);  // device >= 0: made current first
void device_free(void* p);

// The library's own scratch memory on CUDA device `device` (-1: the current one): from the
// device's cached pool (stream-ordered, kept between calls: no cudaMalloc or cudaFree and
// their synchronisation per call), ready for any stream when it returns. device_pool_free
// hands it back after the work queued on `stream` (a cudaStream_t: the last to use it, its
// kernels perhaps still running; null: no work that uses it is left); during an exception's
// unwinding it waits for the device first. Throws as run_device_gemm does.
void* device_pool_malloc(std::size_t bytes, int device = -1);
void device_pool_free(void* p, void* stream = nullptr);

// device_pool_malloc's memory, handed back however the call that holds it ends, after the
// work queued on `stream` (null: none left).
struct DeviceBlock {
  void* p = nullptr;
  void* stream = nullptr;
  DeviceBlock() = default;
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock() { device_pool_free(p, stream); }
};

// The CUDA engine's kernel time on the calling thread so far, in seconds (CUDA events around
// each run_device_gemm's GEMM kernels; resident operands' decoding and host copies not):
// a benchmark that times a library entry (gemm() with Device::cuda, gemm_resident) reads the
// kernels' share of it as the difference across the call. 0 in a build without CUDA. A
// resident GEMM that has nothing to report returns without waiting for its kernels (no
// synchronisation per call): its events wait on the thread's list, and this waits for them
// (unless device_kernel_take took them first).
double device_kernel_seconds();

// The kernel events the calling thread's GEMMs left unread since the last take or
// device_kernel_seconds(), handed to the caller (no wait): seconds() waits for those
// kernels and returns their time (once; later calls return it again); the events go back to
// the engine's pool when this is destroyed. Their time is not in device_kernel_seconds()
// then. Empty in a build without CUDA (seconds() 0).
class DeviceKernelEvents {
 public:
  DeviceKernelEvents() = default;
  DeviceKernelEvents(DeviceKernelEvents&& o) noexcept;
  DeviceKernelEvents& operator=(DeviceKernelEvents&& o) noexcept;
  DeviceKernelEvents(const DeviceKernelEvents&) = delete;
  DeviceKernelEvents& operator=(const DeviceKernelEvents&) = delete;
  ~DeviceKernelEvents();
  double seconds();
  std::size_t size() const { return pairs_.size(); }

  struct Pair {
    void* start;  // cudaEvent_t
    void* end;
    int device;
  };

 private:
  friend DeviceKernelEvents device_kernel_take();
  std::vector<Pair> pairs_;
  double seconds_ = 0;
  bool settled_ = false;
};
DeviceKernelEvents device_kernel_take();

// Peak device memory (bytes) of the current CUDA device since the last call with reset: the
// high-water mark of the engine's memory pool (its operands, prepared copies, D) plus that of
// device_malloc's blocks (live ones included), so an upper bound of their sum's peak. reset:
// return the peak so far and start a new window. 0 in a build without CUDA.
std::size_t device_memory_peak(bool reset = false);

}  // namespace fp8sim
