#pragma once
// Shared by the GPU kernel tests (tests/gpu/cuda_*half*_test.cpp): device
// memory that uploads and downloads host vectors of the same element size, and
// seeded random bfloat16 inputs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "cpu/kernels.hpp"  // the CPU backend's BFloat16 (core/src/cpu)

namespace remat::gpu {

// Device memory of `count` elements of T, freed by its owner.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    void* raw = nullptr;
    EXPECT_EQ(cudaMalloc(&raw, count * sizeof(T) + 1), cudaSuccess) << "cudaMalloc of " << count << " elements";
    data_.reset(static_cast<T*>(raw));
  }
  T* get() const { return data_.get(); }
  template <typename H>
  void upload(const std::vector<H>& host) const {
    static_assert(sizeof(H) == sizeof(T));
    ASSERT_EQ(cudaMemcpy(get(), host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename H>
  std::vector<H> download() const {
    static_assert(sizeof(H) == sizeof(T));
    std::vector<H> host(count_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  struct Free {
    void operator()(T* p) const { cudaFree(p); }
  };
  std::size_t count_;
  std::unique_ptr<T, Free> data_;
};

// `count` bfloat16 values uniform in [-bound, bound), the same for the same
// seed.
inline std::vector<cpu::BFloat16> randomHalves(std::size_t count, std::uint32_t seed, float bound) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<cpu::BFloat16> out;
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(dist(gen));
  return out;
}

}  // namespace remat::gpu
