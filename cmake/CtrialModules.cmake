# ctrial's modules: one folder of src/ (and shim/) each, built as one CMake
# object library named ctrial_<module>. docs/design.md explains the layers;
# the `USES` lists given here are the rule itself (which module may use
# which), and tools/check_layers.py holds every #include to it.
#
#   ctrial_module(NAME [SOURCES ...] USES mod... LIBS target...)
#       defines ctrial_NAME from src/NAME/*.c (or SOURCES), compiled with
#       ctrial's C warnings; LIBS are the outside libraries its code calls.
#   ctrial_link_modules(TARGET mod...)
#       links TARGET with those modules and every module they use, directly
#       (an object library's objects reach only targets that link it
#       directly), so a test or a fuzzer names what it exercises and gets
#       nothing else: a program linking pure-C modules links no libtorch.

# The repository's root, whichever project includes this file: ctrial's own
# (CMakeLists.txt) or the fuzzers' (fuzz/CMakeLists.txt), whose
# PROJECT_SOURCE_DIR is fuzz/.
get_filename_component(CTRIAL_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

function(ctrial_module name)
  cmake_parse_arguments(M "" "" "SOURCES;USES;LIBS" ${ARGN})
  if(NOT M_SOURCES)
    file(GLOB M_SOURCES CONFIGURE_DEPENDS ${CTRIAL_SOURCE_DIR}/src/${name}/*.c)
  endif()
  add_library(ctrial_${name} OBJECT ${M_SOURCES})
  # Internal headers are included by their module's folder ("fit/context.h"),
  # so no internal header can shadow a system or dependency header.
  target_include_directories(ctrial_${name} PUBLIC
    $<BUILD_INTERFACE:${CTRIAL_SOURCE_DIR}/src>
    $<BUILD_INTERFACE:${CTRIAL_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
  target_compile_options(ctrial_${name} PRIVATE $<$<COMPILE_LANGUAGE:C>:${CTRIAL_C_WARNINGS}>)
  if(M_LIBS)
    target_link_libraries(ctrial_${name} PUBLIC ${M_LIBS})
  endif()
  set_property(TARGET ctrial_${name} PROPERTY CTRIAL_USES ${M_USES})
  set_property(GLOBAL APPEND PROPERTY CTRIAL_MODULES ${name})
endfunction()

# NAME and every module it uses, directly or not, into ${out}.
function(_ctrial_module_closure out)
  set(todo ${ARGN})
  set(seen "")
  while(todo)
    list(POP_FRONT todo m)
    if(m IN_LIST seen)
      continue()
    endif()
    if(NOT TARGET ctrial_${m})
      message(FATAL_ERROR "ctrial: no module '${m}' (cmake/CtrialModules.cmake)")
    endif()
    list(APPEND seen ${m})
    get_property(uses TARGET ctrial_${m} PROPERTY CTRIAL_USES)
    list(APPEND todo ${uses})
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(ctrial_link_modules target)
  _ctrial_module_closure(mods ${ARGN})
  foreach(m IN LISTS mods)
    target_link_libraries(${target} PRIVATE ctrial_${m})
  endforeach()
endfunction()
