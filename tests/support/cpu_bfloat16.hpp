#pragma once
// Tests that run bfloat16 on the CPU skip, with the device's reason, where oneDNN has no bfloat16
// kernels (CPUs without AVX-512; cpuBfloat16Support in remat/cpu/cpu_device.hpp).
#include <gtest/gtest.h>

#include "remat/cpu/cpu_device.hpp"

#define REMAT_SKIP_WITHOUT_CPU_BFLOAT16()                                                                       \
  do {                                                                                                          \
    if (const ::remat::Status bf16 = ::remat::cpu::cpuBfloat16Support(); !bf16) GTEST_SKIP() << bf16.message(); \
  } while (false)
