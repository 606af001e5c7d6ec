// sanitized: whether this test binary is built with AddressSanitizer or ThreadSanitizer
// (tests/run.sh's build-asan and build-tsan). A differential sweep may check a strided subset
// of its cases there: the plain build (build/, every ctest test) checks every case, and the
// sanitizer builds, there to catch memory errors, undefined behaviour and races, still run
// every code path of the sweep, on fewer inputs. Known at compile time, so that no setting can
// thin the plain build's sweeps. The sweeps thinned (each file's header or case says how):
// test_format_batch, test_gemm_prefixes, test_triton_config, test_cublaslt_plan,
// test_kernel's replay of the captured kernels, test_invariance's movement check,
// test_probe's grid of custom models, test_cli_reliability's streaming replay and
// test_sweep's thread counts.
#pragma once

namespace fp8sim::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace fp8sim::test
