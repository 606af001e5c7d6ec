// test_threads: the threaded paths (gemm, gemm_prefixes, batched_dot, run_sweep, parallel_for)
// give the bits of one thread at 2, 3 and 8 threads. Small on purpose: tests/run.sh also runs
// it under ThreadSanitizer (build-tsan), where any data race is a failure.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "base/bits.hpp"
#include "gemm/gemm.hpp"
#include "base/parallel.hpp"
#include "base/rng.hpp"
#include "analysis/sweep.hpp"

using namespace fp8sim;

TEST_CASE("gemm, gemm_prefixes and batched_dot give the same bits at any thread count", "[unit]") {
  constexpr int M = 24, N = 16, K = 512;
  std::vector<std::uint8_t> a(M * K), b(N * K);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::uint8_t(random_u64(3, 0, i) & 0x7e);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(random_u64(3, 1, i) & 0x7e);
  GemmSpec s;
  s.a_format = s.b_format = format_by_name("e4m3");
  s.model = accumulator_by_name("hopper-wgmma");
  s.promote_every = 128;
  s.out_type = format_by_name("fp32");
  const Operand A = decode_operand(s.a_format, M, K, a), B = decode_operand(s.b_format, N, K, b);
  const std::vector<int> ks{128, 256, 384};
  auto run = [&](int threads) {
    s.threads = threads;
    std::vector<float> d(M * N), dp(ks.size() * M * N), t(M);
    gemm_prefixes(s, A, B, {}, {}, {}, ks, d, dp);
    const Operand A2 = decode_operand(s.a_format, M, K, std::span(a).first(std::size_t(M) * K));
    const Operand B2 = decode_operand(s.b_format, M, K, std::span(a).first(std::size_t(M) * K));
    batched_dot(s, A2, B2, {}, {}, {}, t);
    d.insert(d.end(), dp.begin(), dp.end());
    d.insert(d.end(), t.begin(), t.end());
    return d;
  };
  const auto one = run(1);
  for (const int threads : {2, 3, 8}) {
    const auto many = run(threads);
    REQUIRE(many.size() == one.size());
    for (std::size_t i = 0; i < one.size(); ++i) REQUIRE(same_bits(many[i], one[i]));
  }
}

TEST_CASE("run_sweep gives the same trials at any thread count", "[unit]") {
  SweepSpec s;
  s.k = {256};
  s.trials = 16;
  s.threads = 1;
  const SweepResult one = run_sweep(s);
  s.threads = 4;
  const SweepResult four = run_sweep(s);
  REQUIRE(one.trials.size() == four.trials.size());
  for (std::size_t i = 0; i < one.trials.size(); ++i) REQUIRE(same_bits(one.trials[i].got, four.trials[i].got));
}

TEST_CASE("parallel_for rethrows a body's exception after every thread ends", "[unit]") {
  std::vector<int> hit(64, 0);
  CHECK_THROWS_AS(parallel_for(hit.size(), 4,
                               [&](std::size_t b, std::size_t e) {
                                 for (std::size_t i = b; i < e; ++i) hit[i] = 1;
                                 if (b == 0) throw std::runtime_error("piece 0");
                               }),
                  std::runtime_error);
  for (int h : hit) CHECK(h == 1);
}
