# Installs headers, both libraries, a CMake package (find_package(ctrial) ->
# ctrial::ctrial, ctrial::ctrial_static) and two pkg-config files (ctrial.pc:
# the shared library; ctrial-static.pc: the archive). Every installed file
# finds the rest from where it lies, so the prefix can be moved; what lies
# outside it (libtorch & co.) is named by absolute path: README, "What an
# install depends on".
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ctrial DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/ctrial/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ctrial)

# ---- what the static archive needs ------------------------------------------
# libctrial.a carries no dependencies of its own: a program that links it
# links what libctrial.so links (its NEEDED entries): libtorch's libraries, the
# CUDA runtime and NCCL (the shim calls both directly; by full path: the wheel
# ships no libcudart.so or libnccl.so for -l to find), MPI, jansson, libyaml, libpng, libjpeg,
# libcurl, libxml2, zlib and the C++ runtime.
set(_torch_libs "")
foreach(_n torch torch_cpu c10 c10_cuda)
  if(EXISTS "${CTRIAL_TORCH_LIBDIR}/lib${_n}.so")
    list(APPEND _torch_libs "${CTRIAL_TORCH_LIBDIR}/lib${_n}.so")
  endif()
endforeach()
list(APPEND _torch_libs ${CTRIAL_CUDART_LIBRARY})
if(CTRIAL_HAVE_NCCL)
  list(APPEND _torch_libs "${CTRIAL_NCCL_LIBRARY}")
endif()
set(_system_libs ${JANSSON_LINK_LIBRARIES} ${YAML_LINK_LIBRARIES} ${PNG_LIBRARIES} ${JPEG_LIBRARIES} ${CURL_LIBRARIES}
    ${LIBXML2_LIBRARIES} ${ZLIB_LIBRARIES})
if(CTRIAL_HAVE_MPI)
  list(APPEND _system_libs ${MPI_C_LIBRARIES})
endif()
list(REMOVE_DUPLICATES _system_libs)
set(_runtime_libs stdc++ m ${CMAKE_THREAD_LIBS_INIT} ${CMAKE_DL_LIBS})

# Paths under libtorch's folder, or under the torch wheel's nvidia/ packages
# beside it, are written relative to one variable reference (REF), so that
# a consumer points them all at another copy of the same libtorch at once.
get_filename_component(_site "${CTRIAL_TORCH_LIBDIR}/../.." ABSOLUTE)
function(_ctrial_under_torch out ref)
  set(_r "")
  foreach(_p IN LISTS ARGN)
    cmake_path(IS_PREFIX CTRIAL_TORCH_LIBDIR "${_p}" NORMALIZE _in_lib)
    string(FIND "${_p}" "${_site}/nvidia/" _in_nvidia)
    if(_in_lib OR _in_nvidia EQUAL 0)
      cmake_path(RELATIVE_PATH _p BASE_DIRECTORY "${CTRIAL_TORCH_LIBDIR}" OUTPUT_VARIABLE _rel)
      if(_rel STREQUAL "." OR _rel STREQUAL "")
        set(_p "${ref}")
      else()
        set(_p "${ref}/${_rel}")
      endif()
    endif()
    list(APPEND _r "${_p}")
  endforeach()
  set(${out} "${_r}" PARENT_SCOPE)
endfunction()

# Where the linker finds them when it links a program: a program linking
# libctrial.so needs them too (ld resolves libctrial.so's dependencies, and
# its run path may name folders of another machine, or none).
_ctrial_under_torch(CTRIAL_TORCH_LINK_DIRS "\${ctrial_TORCH_LIBDIR}" ${CTRIAL_RPATH})
_ctrial_under_torch(_pc_link_dirs "\${torchlibdir}" ${CTRIAL_RPATH})

# The run path a program linking the archive records: the one the installed
# libctrial.so records (CTRIAL_TORCH_RPATH), which by default is the folders
# it links from, and then follows them.
if(CTRIAL_TORCH_RPATH STREQUAL "")
  set(_cmake_rpath "${CTRIAL_TORCH_LINK_DIRS}")
  set(_pc_rpath "${_pc_link_dirs}")
else()
  set(_cmake_rpath "${CTRIAL_INSTALL_TORCH_RPATH}")
  set(_pc_rpath "${CTRIAL_INSTALL_TORCH_RPATH}")
endif()

# libtorch_cuda registers CUDA with libtorch when it loads: keep it even if
# the program uses none of its symbols (--as-needed), as torch's target does.
set(_cuda_keep "")
if(CTRIAL_TORCH_HAS_CUDA)
  set(_cuda_keep "-Wl,--push-state,--no-as-needed,@LIB@/libtorch_cuda.so,--pop-state")
endif()

# The CMake package: ctrial::ctrial_static's INTERFACE_LINK_LIBRARIES and
# INTERFACE_LINK_OPTIONS (ctrialConfig.cmake.in).
_ctrial_under_torch(CTRIAL_STATIC_DEPS "\${ctrial_TORCH_LIBDIR}" ${_torch_libs})
string(REPLACE "@LIB@" "\${ctrial_TORCH_LIBDIR}" _keep "${_cuda_keep}")
list(APPEND CTRIAL_STATIC_DEPS ${_keep} ${_system_libs} ${_runtime_libs})
set(CTRIAL_STATIC_RPATH "${_cmake_rpath}")

# pkg-config: the same list as linker flags.
_ctrial_under_torch(_pc_deps "\${torchlibdir}" ${_torch_libs})
string(REPLACE "@LIB@" "\${torchlibdir}" _keep "${_cuda_keep}")
list(APPEND _pc_deps ${_keep} ${_system_libs})
foreach(_l IN LISTS _runtime_libs)
  if(_l MATCHES "^-")
    list(APPEND _pc_deps "${_l}")
  else()
    list(APPEND _pc_deps "-l${_l}")
  endif()
endforeach()
if(_pc_rpath)
  list(JOIN _pc_rpath ":" _r)
  list(APPEND _pc_deps "-Wl,-rpath,${_r}")
endif()
list(JOIN _pc_deps " " CTRIAL_PC_STATIC_DEPS)

set_target_properties(ctrial_static PROPERTIES EXPORT_NAME ctrial_static)
install(TARGETS ctrial ctrial_static EXPORT ctrialTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ctrialTargets NAMESPACE ctrial:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ctrialConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ctrialConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ctrialConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ctrialConfig.cmake ${PROJECT_BINARY_DIR}/ctrialConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)

# ---- pkg-config ---------------------------------------------------------------
# ${pcfiledir} is <prefix>/<libdir>/pkgconfig: the prefix is as many levels up.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CTRIAL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(CTRIAL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(CTRIAL_PC_PREFIX "\${pcfiledir}/${_up}")
  set(CTRIAL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
# ctrial.pc: libctrial.so, which finds its dependencies itself; Libs.private
# is what the archive needs, for `pkg-config --static` where -lctrial finds
# libctrial.a (a linker takes libctrial.so when both are there).
set(CTRIAL_PC_NAME ctrial)
set(CTRIAL_PC_DESCRIPTION "Embeddable C library for training neural networks (libtorch inside)")
list(JOIN _pc_link_dirs ":" _dirs)
set(CTRIAL_PC_LIBS "-L\${libdir} -Wl,-rpath,\${libdir} -lctrial -Wl,-rpath-link,${_dirs}")
set(CTRIAL_PC_LIBS_PRIVATE "${CTRIAL_PC_STATIC_DEPS}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ctrial.pc.in ${PROJECT_BINARY_DIR}/ctrial.pc @ONLY)
# ctrial-static.pc: libctrial.a by path and everything it needs, with or
# without --static.
set(CTRIAL_PC_NAME ctrial-static)
set(CTRIAL_PC_DESCRIPTION "ctrial as a static library (libctrial.a) with what it links: libtorch, MPI, jansson, libyaml, libpng, libjpeg, libcurl, libxml2, zlib")
set(CTRIAL_PC_LIBS "\${libdir}/libctrial.a ${CTRIAL_PC_STATIC_DEPS}")
set(CTRIAL_PC_LIBS_PRIVATE "")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ctrial.pc.in ${PROJECT_BINARY_DIR}/ctrial-static.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ctrial.pc ${PROJECT_BINARY_DIR}/ctrial-static.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
