// The GPU module loader. REMAT_GPU_MODULE_BUILD_PATH, the module in the build tree, is defined by
// gpu/CMakeLists.txt when this build has a GPU backend; it is the only sign of one in the code.
#include "gpu_module_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace remat {
namespace {

constexpr const char kModuleFileName[] = "libremat_gpu.so";
constexpr const char kNeededLibraries[] =
    "the GPU backend needs the CUDA 13 runtime (libcudart.so.13), cuBLAS (libcublas.so.13, libcublasLt.so.13) and "
    "cuDNN 9 (libcudnn.so.9) where the dynamic loader finds them (ld.so.conf or LD_LIBRARY_PATH)";

using EntryPoint = const GpuModule* (*)();

std::string lastLoaderError() {
  const char* text = dlerror();
  return text != nullptr ? text : "no reason given";
}

#ifdef REMAT_GPU_MODULE_BUILD_PATH
// <directory of the executable>/../lib/remat/libremat_gpu.so; empty when /proc/self/exe is unreadable.
std::string installedModulePath() {
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return (executable.parent_path() / ".." / "lib" / "remat" / kModuleFileName).lexically_normal().string();
}
#endif

struct SearchPaths {
  std::vector<std::string> paths;
  bool fromEnvironment = false;
};

Result<SearchPaths> searchPaths() {
  if (const char* overridePath = std::getenv("REMAT_GPU_MODULE"); overridePath != nullptr && *overridePath != '\0')
    return SearchPaths{{overridePath}, true};
#ifdef REMAT_GPU_MODULE_BUILD_PATH
  SearchPaths search;
  if (std::string installed = installedModulePath(); !installed.empty()) search.paths.push_back(installed);
  search.paths.push_back(REMAT_GPU_MODULE_BUILD_PATH);
  return search;
#else
  return Status::invalid(
      "this build has no GPU backend (configure with -DREMAT_WITH_CUDA=ON where CUDA 13 and cuDNN 9 are installed)");
#endif
}

Result<const GpuModule*> openModule(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return Status::invalid("cannot load the GPU module " + path + ": " + lastLoaderError() + "; " + kNeededLibraries);
  auto entry = reinterpret_cast<EntryPoint>(dlsym(handle, kGpuModuleEntryPoint));
  if (entry == nullptr) {
    const std::string why = lastLoaderError();
    dlclose(handle);
    return Status::invalid(path + " is not a Remat GPU module (" + why + ")");
  }
  const GpuModule* module = entry();
  if (module == nullptr || module->abiVersion != kGpuModuleAbiVersion) {
    const std::string version = module == nullptr ? std::string("none") : std::to_string(module->abiVersion);
    dlclose(handle);
    return Status::invalid("the GPU module " + path + " has ABI version " + version + ", this program needs " +
                           std::to_string(kGpuModuleAbiVersion) + ": build the program and the module together");
  }
  // Never closed: the devices it opens, and their destructors, are its code.
  return module;
}

}  // namespace

Result<std::string> findGpuModule() {
  auto search = searchPaths();
  if (!search) return search.status();
  std::string tried;
  for (const std::string& path : search->paths) {
    std::error_code error;
    if (std::filesystem::exists(path, error)) return path;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (search->fromEnvironment) return Status::invalid("REMAT_GPU_MODULE=" + tried + ": no such file");
  return Status::invalid("the GPU module (" + std::string(kModuleFileName) + ") was not found; tried " + tried +
                         " (REMAT_GPU_MODULE may name it)");
}

Result<const GpuModule*> loadGpuModule() {
  auto path = findGpuModule();
  if (!path) return path.status();
  return openModule(*path);
}

}  // namespace remat
