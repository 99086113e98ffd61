# Finds NCCL for collectives on CUDA tensors (src/dist/nccl_comm.c) and defines:
#   CTRIAL_HAVE_NCCL              1 when NCCL is used, else 0
#   CTRIAL_NCCL_LIBRARY           full path of libnccl.so.2 (linked privately)
#   CTRIAL_NCCL_LIBDIR            its directory (for the libraries' RPATH)
#   CTRIAL_NCCL_VERSION           e.g. 2.28.9
#   ctrial_nccl                   INTERFACE target for code that includes
#                                 NCCL's header (src/dist/nccl_comm.c, through
#                                 src/dist/nccl_vendor.h): CUDA's include directory,
#                                 CTRIAL_NCCL_HEADER, and the library
# NCCL is looked for only with CTRIAL_WITH_NCCL, a libtorch with CUDA and
# MPI (which bootstraps it). Where, first match wins:
#   1. the torch wheel's own copy, <site-packages>/nvidia/nccl: libtorch_cuda
#      already loads that libnccl.so.2, and two different NCCLs under one
#      SONAME in one process is a bug, so NCCL_ROOT is not consulted then;
#   2. NCCL_ROOT (cache or environment variable): <root>/include/nccl.h;
#   3. the CUDA toolkit (/usr/local/cuda*), then /usr and /usr/local.
# The wheel ships only libnccl.so.2 (no libnccl.so), so the library is
# always linked by its full path. One status line says what was found or
# why NCCL is not used.
set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "An NCCL install (include/, lib/) used when the torch wheel has none")
set(CTRIAL_HAVE_NCCL 0)
set(_ctrial_nccl_min 2.10.0) # ncclAvg, ncclBfloat16

function(_ctrial_nccl_status why)
  message(STATUS "ctrial: NCCL not used: ${why}; collectives on CUDA tensors are refused")
endfunction()

# The first <root> holding include/nccl.h and a libnccl.so.2 (or libnccl.so)
# in one of its library folders: sets _nccl_root, _nccl_lib.
function(_ctrial_nccl_search)
  set(_nccl_root "" PARENT_SCOPE)
  foreach(root IN LISTS ARGN)
    if(NOT root OR NOT EXISTS "${root}/include/nccl.h")
      continue()
    endif()
    foreach(dir lib lib64 "lib/${CMAKE_LIBRARY_ARCHITECTURE}" targets/x86_64-linux/lib targets/sbsa-linux/lib)
      foreach(name libnccl.so.2 libnccl.so)
        if(EXISTS "${root}/${dir}/${name}")
          set(_nccl_root "${root}" PARENT_SCOPE)
          set(_nccl_lib "${root}/${dir}/${name}" PARENT_SCOPE)
          return()
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()

if(NOT CTRIAL_WITH_NCCL)
  _ctrial_nccl_status("CTRIAL_WITH_NCCL is OFF")
  return()
elseif(NOT CTRIAL_TORCH_HAS_CUDA)
  _ctrial_nccl_status("libtorch has no CUDA")
  return()
elseif(NOT CTRIAL_HAVE_MPI)
  _ctrial_nccl_status("no MPI to bootstrap it (CTRIAL_WITH_MPI is OFF or MPI was not found)")
  return()
endif()

# The site-packages holding torch: CTRIAL_TORCH_LIBDIR is <sp>/torch/lib.
get_filename_component(_ctrial_site "${CTRIAL_TORCH_LIBDIR}/../.." ABSOLUTE)
file(GLOB _ctrial_cuda_roots LIST_DIRECTORIES true /usr/local/cuda-*)
list(SORT _ctrial_cuda_roots ORDER DESCENDING)

set(_ctrial_nccl_from "")
_ctrial_nccl_search("${_ctrial_site}/nvidia/nccl")
if(_nccl_root)
  set(_ctrial_nccl_from "the torch wheel")
else()
  _ctrial_nccl_search("${NCCL_ROOT}")
  if(_nccl_root)
    set(_ctrial_nccl_from "NCCL_ROOT")
  else()
    _ctrial_nccl_search(${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda ${_ctrial_cuda_roots} /usr /usr/local)
    if(_nccl_root)
      set(_ctrial_nccl_from "the system")
    endif()
  endif()
endif()
if(NOT _nccl_root)
  _ctrial_nccl_status("no include/nccl.h with libnccl.so.2 in ${_ctrial_site}/nvidia/nccl, NCCL_ROOT, the CUDA toolkit or /usr (set NCCL_ROOT)")
  return()
endif()

file(STRINGS "${_nccl_root}/include/nccl.h" _ctrial_nccl_defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
set(_ctrial_nccl_version "")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "NCCL_${part} +([0-9]+)" _m "${_ctrial_nccl_defs}")
  list(APPEND _ctrial_nccl_version "${CMAKE_MATCH_1}")
endforeach()
list(JOIN _ctrial_nccl_version "." _ctrial_nccl_version)
if(_ctrial_nccl_version VERSION_LESS _ctrial_nccl_min)
  _ctrial_nccl_status("NCCL ${_ctrial_nccl_version} in ${_nccl_root} is older than ${_ctrial_nccl_min}")
  return()
endif()

# nccl.h includes cuda_runtime.h: the wheel's CUDA headers first (they match
# the runtime libtorch loads), then the toolkit's.
find_path(CTRIAL_CUDA_INCLUDE_DIR cuda_runtime.h
  HINTS "${_ctrial_site}/nvidia/cu13/include" "${_ctrial_site}/nvidia/cuda_runtime/include"
        ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_INCLUDE_DIRS} /usr/local/cuda/include
  DOC "Directory of cuda_runtime.h (for NCCL's header)")
if(NOT CTRIAL_CUDA_INCLUDE_DIR)
  _ctrial_nccl_status("cuda_runtime.h (which nccl.h includes) was not found (set CTRIAL_CUDA_INCLUDE_DIR)")
  return()
endif()

set(CTRIAL_HAVE_NCCL 1)
set(CTRIAL_NCCL_LIBRARY "${_nccl_lib}")
get_filename_component(CTRIAL_NCCL_LIBDIR "${_nccl_lib}" DIRECTORY)
set(CTRIAL_NCCL_VERSION "${_ctrial_nccl_version}")

add_library(ctrial_nccl INTERFACE)
# SYSTEM: CUDA's headers are not held to ctrial's warning flags. A compiler's
# own include directory is left out (-isystem /usr/include reorders it).
if(NOT CTRIAL_CUDA_INCLUDE_DIR IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
  target_include_directories(ctrial_nccl SYSTEM INTERFACE "${CTRIAL_CUDA_INCLUDE_DIR}")
endif()
target_compile_definitions(ctrial_nccl INTERFACE "CTRIAL_NCCL_HEADER=\"${_nccl_root}/include/nccl.h\"")
target_link_libraries(ctrial_nccl INTERFACE "${CTRIAL_NCCL_LIBRARY}")

message(STATUS "ctrial: NCCL ${CTRIAL_NCCL_VERSION} from ${_ctrial_nccl_from}: ${CTRIAL_NCCL_LIBRARY}")
