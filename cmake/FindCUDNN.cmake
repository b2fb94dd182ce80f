# FindCUDNN: cuDNN 9 as the imported target CUDNN::cudnn.
#
# Looks next to the CUDA toolkit, in the system's library folders, and in the Python wheel
# nvidia-cudnn (headers and libraries under site-packages/nvidia/cudnn, e.g. beside PyTorch in
# /opt/torch/.venv). A runtime-only install may have libcudnn.so.9 without the libcudnn.so
# development link, so that name is accepted too. Set CUDNN_INCLUDE_DIR / CUDNN_LIBRARY to choose.
#
# Results: CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, target CUDNN::cudnn.
file(GLOB _cudnn_wheel_dirs
  /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn
  /usr/local/lib/python3*/dist-packages/nvidia/cudnn
  /usr/lib/python3/dist-packages/nvidia/cudnn)
set(_cudnn_include_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
set(_cudnn_library_hints ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /lib/x86_64-linux-gnu
                         /usr/lib/x86_64-linux-gnu)
foreach(_cudnn_dir IN LISTS _cudnn_wheel_dirs)
  list(APPEND _cudnn_include_hints ${_cudnn_dir}/include)
  list(APPEND _cudnn_library_hints ${_cudnn_dir}/lib)
endforeach()

find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_include_hints} PATH_SUFFIXES x86_64-linux-gnu)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_library_hints})

if(CUDNN_INCLUDE_DIR)
  foreach(_cudnn_header cudnn_version.h cudnn.h)
    if(EXISTS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}")
      file(STRINGS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}" _cudnn_lines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
      if(_cudnn_lines)
        string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _cudnn_major "${_cudnn_lines}")
        string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _cudnn_minor "${_cudnn_lines}")
        string(REGEX REPLACE ".*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1" _cudnn_patch "${_cudnn_lines}")
        set(CUDNN_VERSION "${_cudnn_major}.${_cudnn_minor}.${_cudnn_patch}")
        break()
      endif()
    endif()
  endforeach()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)

if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
