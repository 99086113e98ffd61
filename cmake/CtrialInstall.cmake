# Installs headers, both libraries, a CMake package (find_package(ctrial) ->
# ctrial::ctrial, ctrial::ctrial_static) and a pkg-config file (ctrial.pc).
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ctrial DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/ctrial/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ctrial)

# The static archive needs libtorch & co. at the consumer's link step; the
# installed target names them by absolute path (the libtorch this was built
# against), which is what a consumer of the shared library gets through RUNPATH.
get_target_property(_torch_iface torch INTERFACE_LINK_LIBRARIES)
set(_static_deps "${_torch_loc}")
foreach(_l IN LISTS TORCH_LIBRARIES)
  if(EXISTS "${_l}")
    list(APPEND _static_deps "${_l}")
  endif()
endforeach()
foreach(_n c10 torch_cpu torch_cuda c10_cuda)
  if(EXISTS "${CTRIAL_TORCH_LIBDIR}/lib${_n}.so")
    list(APPEND _static_deps "${CTRIAL_TORCH_LIBDIR}/lib${_n}.so")
  endif()
endforeach()
list(REMOVE_DUPLICATES _static_deps)
list(APPEND _static_deps ${JANSSON_LINK_LIBRARIES} ${PNG_LIBRARIES} ${ZLIB_LIBRARIES} stdc++ pthread m dl)
if(CTRIAL_HAVE_MPI)
  list(APPEND _static_deps ${MPI_C_LIBRARIES})
endif()
if(CTRIAL_HAVE_NCCL)
  # The full path of the libnccl.so.2 libtorch_cuda loads (the wheel has no
  # libnccl.so for -lnccl to find).
  list(APPEND _static_deps "${CTRIAL_NCCL_LIBRARY}")
endif()
if(CTRIAL_TORCH_HAS_CUDA)
  # libtorch_cuda registers CUDA at load time and has no symbol we use
  # directly: keep it against --as-needed.
  set(_static_link_opts "LINKER:--no-as-needed,${CTRIAL_TORCH_LIBDIR}/libtorch_cuda.so,--as-needed")
endif()
set_target_properties(ctrial_static PROPERTIES EXPORT_NAME ctrial_static)

install(TARGETS ctrial ctrial_static EXPORT ctrialTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ctrialTargets NAMESPACE ctrial:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)

set(CTRIAL_STATIC_DEPS "${_static_deps}")
set(CTRIAL_STATIC_LINK_OPTS "${_static_link_opts}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ctrialConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ctrialConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ctrialConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ctrialConfig.cmake ${PROJECT_BINARY_DIR}/ctrialConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctrial)

configure_file(${PROJECT_SOURCE_DIR}/cmake/ctrial.pc.in ${PROJECT_BINARY_DIR}/ctrial.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ctrial.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
