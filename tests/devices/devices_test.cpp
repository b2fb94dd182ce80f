// openDevice() and deviceAvailable(): the CPU opens with its default capacity and refuses plans
// beyond it; unknown names are refused naming the known ones; every way of not getting a GPU
// (no module, not a module, a stale module, no driver or device) is a message, never a crash.
#include "remat/devices/devices.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <exception>
#include <string>
#include <vector>

#include "process_maps.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/devices/gpu_module.hpp"
#include "temp_folder.hpp"

namespace remat {
namespace {

TEST(Devices, NamesTheDevicesItKnows) {
  const std::vector<std::string_view> names(deviceNames().begin(), deviceNames().end());
  EXPECT_EQ(names, (std::vector<std::string_view>{"cpu", "gpu"}));
}

TEST(Devices, OpensTheCpuWithThreeQuartersOfTheMachine) {
  auto device = openDevice("cpu");
  ASSERT_TRUE(device.isOk()) << device.status().message();
  EXPECT_EQ((*device)->name(), "cpu");
  EXPECT_EQ(defaultCpuCapacityBytes(), cpu::physicalMemoryBytes() / 4 * 3);
  auto available = (*device)->availableBytes();
  ASSERT_TRUE(available.isOk()) << available.status().message();
  EXPECT_EQ(*available, defaultCpuCapacityBytes());
  EXPECT_NE((*device)->describe().find("capacity"), std::string::npos) << (*device)->describe();
  EXPECT_TRUE(deviceAvailable("cpu").isOk());
}

TEST(Devices, TheCpuRefusesAPlanBeyondItsCapacity) {
  auto device = openDevice("cpu", {.cpuCapacityBytes = 1 << 20});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  EXPECT_TRUE((*device)->checkFits(1 << 20).isOk());
  const Status tooBig = (*device)->checkFits(3 << 20);
  ASSERT_FALSE(tooBig.isOk());
  EXPECT_EQ(tooBig.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(tooBig.message().find("needs 3.00 MiB on cpu"), std::string::npos) << tooBig.message();
  EXPECT_NE(tooBig.message().find("has 1.00 MiB available"), std::string::npos) << tooBig.message();
  // What the device already holds counts towards the peak and against what is available.
  auto held = (*device)->allocator().allocate(768 << 10);
  ASSERT_TRUE(held.isOk());
  EXPECT_TRUE((*device)->checkFits(1 << 20).isOk());
  const Status withHeld = (*device)->checkFits((1 << 20) + 1);
  EXPECT_EQ(withHeld.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(withHeld.message().find("768.00 KiB already held"), std::string::npos) << withHeld.message();
  ASSERT_TRUE((*device)->allocator().release(*held).isOk());
}

TEST(Devices, UnknownNamesAreRefusedNamingTheKnownOnes) {
  auto device = openDevice("tpu");
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(device.status().message(), "unknown device 'tpu' (expected one of: cpu, gpu)");
  EXPECT_EQ(deviceAvailable("tpu").message(), device.status().message());
}

// Without an override: a GPU, or a message that says why not; when the module loaded (the reason is
// the runtime's), CUDA is mapped now, which shows that the check of the planning test can fail.
TEST(Devices, TheGpuOpensOrSaysWhyNot) {
  if (getenv("REMAT_GPU_MODULE") != nullptr) GTEST_SKIP() << "REMAT_GPU_MODULE is set; this test searches itself";
  const Status available = deviceAvailable("gpu");
  auto device = openDevice("gpu");
  if (available.isOk()) {
    ASSERT_TRUE(device.isOk()) << device.status().message();
    EXPECT_EQ((*device)->name(), "gpu");
    EXPECT_FALSE((*device)->describe().empty());
    GTEST_SKIP() << "a GPU is present: " << (*device)->describe();
  }
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(device.status().message(), available.message());
  const std::string& why = available.message();
  const bool noDevice = why.rfind("no CUDA device: ", 0) == 0;
  const bool noBackend = why.rfind("this build has no GPU backend", 0) == 0;
  const bool notLoadable = why.find("GPU module") != std::string::npos;
  EXPECT_TRUE(noDevice || noBackend || notLoadable) << why;
  if (noDevice) {
    EXPECT_FALSE(testing::mappedCudaLibraries().empty()) << "the module loaded, so CUDA is mapped";
  }
}

// REMAT_GPU_MODULE set for one test, and unset again after it.
class GpuModuleOverride : public testing::TempFolderTest {
 protected:
  void TearDown() override {
    unsetenv("REMAT_GPU_MODULE");
    TempFolderTest::TearDown();
  }
  // The message of a "gpu" request with the module at `path`; both entry points must agree.
  static std::string gpuFailure(const std::string& path) {
    setenv("REMAT_GPU_MODULE", path.c_str(), 1);
    auto device = openDevice("gpu");
    EXPECT_FALSE(device.isOk());
    if (device.isOk()) return {};
    EXPECT_EQ(device.status().code(), ErrorCode::InvalidInput);
    EXPECT_EQ(deviceAvailable("gpu").message(), device.status().message());
    return device.status().message();
  }
};

TEST_F(GpuModuleOverride, AMissingFileIsNamed) {
  const std::string missing = path("nowhere/libremat_gpu.so");
  EXPECT_EQ(gpuFailure(missing), "REMAT_GPU_MODULE=" + missing + ": no such file");
}

TEST_F(GpuModuleOverride, AFileThatIsNoSharedObjectIsNamedWithTheLoadersReason) {
  const std::string text = write("libremat_gpu.so", "this is a text file, not a shared object\n");
  const std::string why = gpuFailure(text);
  EXPECT_EQ(why.rfind("cannot load the GPU module " + text + ": ", 0), 0u) << why;
  EXPECT_NE(why.find("libcudnn.so.9"), std::string::npos) << "the libraries it needs: " << why;
}

TEST_F(GpuModuleOverride, ASharedObjectWithoutTheEntryPointIsNotAModule) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&std::terminate), &info), 0);  // libstdc++ itself
  const std::string library = info.dli_fname;
  const std::string why = gpuFailure(library);
  EXPECT_EQ(why.rfind(library + " is not a Remat GPU module (", 0), 0u) << why;
  EXPECT_NE(why.find("remat_gpu_module"), std::string::npos) << why;
}

TEST_F(GpuModuleOverride, InstalledOnlyLooksForTheFileAndLoadsNothing) {
  EXPECT_TRUE(deviceInstalled("cpu").isOk());
  EXPECT_FALSE(deviceInstalled("tpu").isOk());
  const std::string missing = path("nowhere/libremat_gpu.so");
  setenv("REMAT_GPU_MODULE", missing.c_str(), 1);
  EXPECT_EQ(deviceInstalled("gpu").message(), "REMAT_GPU_MODULE=" + missing + ": no such file");
  // A file that is there counts as installed, though loading it would fail: the check is the search.
  const std::string text = write("libremat_gpu.so", "not a shared object\n");
  setenv("REMAT_GPU_MODULE", text.c_str(), 1);
  EXPECT_TRUE(deviceInstalled("gpu").isOk());
  EXPECT_FALSE(deviceAvailable("gpu").isOk());
}

TEST_F(GpuModuleOverride, AModuleOfAnotherAbiVersionIsRefused) {
  const std::string why = gpuFailure(REMAT_STALE_GPU_MODULE);
  const std::string expected = "has ABI version " + std::to_string(kGpuModuleAbiVersion + 1) + ", this program needs " +
                               std::to_string(kGpuModuleAbiVersion);
  EXPECT_NE(why.find(expected), std::string::npos) << why;
}

}  // namespace
}  // namespace remat
