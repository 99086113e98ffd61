# Locates libtorch and defines:
#   torch                  imported target (from libtorch's own TorchConfig)
#   CTRIAL_TORCH_LIBDIR    directory holding libtorch.so
#   CTRIAL_TORCH_HAS_CUDA  TRUE when that libtorch was built with CUDA
#   CTRIAL_TORCH_VERSION   its version
# Where to look, first match wins: -DLIBTORCH=<unzipped libtorch> (or the
# LIBTORCH environment variable), -DTorch_DIR=..., then the torch package of
# the project's virtual environment (.venv), then of `python3` on PATH.
if(NOT LIBTORCH AND DEFINED ENV{LIBTORCH})
  set(LIBTORCH "$ENV{LIBTORCH}" CACHE PATH "An unpacked libtorch (zip) to build against" FORCE)
endif()

if(LIBTORCH)
  list(PREPEND CMAKE_PREFIX_PATH "${LIBTORCH}")
elseif(NOT Torch_DIR)
  foreach(py "${PROJECT_SOURCE_DIR}/.venv/bin/python" python3)
    execute_process(
      COMMAND ${py} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _torch_rc ERROR_QUIET)
    if(_torch_rc EQUAL 0 AND _torch_prefix)
      message(STATUS "ctrial: libtorch from the torch package of ${py}")
      list(PREPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
      break()
    endif()
  endforeach()
endif()

# libtorch's config looks for the CUDA toolkit when it was built with CUDA;
# its warnings about optional pieces (kineto, NVTX) are noise here.
find_package(Torch REQUIRED)

get_target_property(_torch_loc torch IMPORTED_LOCATION)
if(NOT _torch_loc)
  get_target_property(_torch_loc torch IMPORTED_LOCATION_RELEASE)
endif()
get_filename_component(CTRIAL_TORCH_LIBDIR "${_torch_loc}" DIRECTORY)

if(EXISTS "${CTRIAL_TORCH_LIBDIR}/libtorch_cuda.so")
  set(CTRIAL_TORCH_HAS_CUDA TRUE)
else()
  set(CTRIAL_TORCH_HAS_CUDA FALSE)
endif()

set(CTRIAL_TORCH_VERSION "${Torch_VERSION}")
message(STATUS "ctrial: libtorch ${CTRIAL_TORCH_VERSION} in ${CTRIAL_TORCH_LIBDIR} (CUDA: ${CTRIAL_TORCH_HAS_CUDA})")
