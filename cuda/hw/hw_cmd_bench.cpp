// hw_cmd_bench: `fp8sim-hw bench`, TFLOP/s of each kernel on a size^3 e4m3 GEMM.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>
#include <functional>

#include "hw/cublaslt_fp8.hpp"
#include "hw/hw_commands.hpp"
#include "hw/hw_device.hpp"
#include "hw/hw_env.hpp"
#include "hw/hw_provenance.hpp"
#include "hw/kernels.hpp"
#include "base/rng.hpp"

namespace fp8sim::hw {

int cmd_bench(int size, int iters) {
  const DeviceInfo dev = device_info();
  const int M = size, N = size, K = size;
  fmt::print("device: {} | driver {} | {}x{}x{} e4m3, {} timed runs after 1 warm-up\n", dev.name, dev.driver, M, N, K, iters);
  std::vector<std::uint8_t> h(static_cast<std::size_t>(M) * K);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint8_t>(mix64(i) % 0x7e) | ((i & 1) << 7);
  DevBuf<std::uint8_t> A(h), B(h), work(32u << 20);
  DevBuf<float> D(static_cast<std::size_t>(M) * N);
  std::vector<float> sah(static_cast<std::size_t>(M) * ((K + 127) / 128), 1.0f), sbh(static_cast<std::size_t>((N + 127) / 128) * ((K + 127) / 128), 1.0f);
  DevBuf<float> sa(sah), sb(sbh);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  auto time = [&](const std::string& name, const std::function<std::string()>& f) {
    launch_check(f());
    cuda_check(cudaDeviceSynchronize(), name.c_str());
    cudaEventRecord(e0);
    for (int i = 0; i < iters; ++i) launch_check(f());
    cudaEventRecord(e1);
    cuda_check(cudaEventSynchronize(e1), name.c_str());
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double s = ms / 1e3 / iters;
    fmt::print("{:<52} {:9.3f} ms  {:7.1f} TFLOP/s\n", name, s * 1e3, 2.0 * M * N * K / s / 1e12);
    std::fflush(stdout);
  };
  for (int tn : skip_wgmma() ? std::vector<int>{} : std::vector<int>{64, 8})
    for (int p : {0, 128})
      for (bool blk : {false, true}) {
        if (blk && p == 0) continue;
        cuda::WgmmaGemm g;
        g.tile_n = tn, g.promote_every = p, g.block_scales = blk;
        time(fmt::format("wgmma_m64n{}k32_f32_e4m3_e4m3{}{}", tn, p ? ".p128" : "", blk ? ".block128" : ""),
             [&] { return cuda::wgmma_gemm(g, M, N, K, A.get(), B.get(), nullptr, sa.get(), sb.get(), D.get()); });
      }
  if (!skip_wgmma()) {
    cuda::WgmmaGemm g;
    g.accum = cuda::Accum::f16;
    time("wgmma_m64n8k32_f16_e4m3_e4m3", [&] { return cuda::wgmma_gemm(g, M, N, K, A.get(), B.get(), nullptr, nullptr, nullptr, D.get()); });
  }
  time("mma_m16n8k32_row_col_f32_e4m3_e4m3_f32", [&] {
    return cuda::mma_sync_gemm(cuda::Fp8::e4m3, cuda::Fp8::e4m3, M, N, K, A.get(), B.get(), nullptr, D.get());
  });
  for (bool fast : {false, true}) {
    std::string algo;
    launch_check(cuda::cublaslt_gemm({fast, false}, M, N, K, A.get(), B.get(), nullptr, D.get(), work.get(), work.size(), &algo));
    time(fmt::format("cublaslt_e4m3_e4m3_f32_{}", fast ? "fastaccum" : "default"), [&] {
      return cuda::cublaslt_gemm({fast, false}, M, N, K, A.get(), B.get(), nullptr, D.get(), work.get(), work.size());
    });
    fmt::print("    {} ({})\n", algo, cuda::cublaslt_version());
  }
  return 0;
}

}  // namespace fp8sim::hw
