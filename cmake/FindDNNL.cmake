# FindDNNL: oneDNN (Debian's libdnnl-dev, or any install) found by its header and library.
#
# oneDNN's own CMake package (dnnl-config.cmake) is not used: Debian builds oneDNN with the
# OpenCL GPU runtime, and that package then calls find_package(OpenCL REQUIRED) and links
# OpenCL::OpenCL, so configuring fails on a machine without ocl-icd-opencl-dev (a package
# libdnnl-dev only recommends). hetrain calls only the CPU C API (oneapi/dnnl/dnnl.h, which
# includes no OpenCL header); libdnnl.so itself brings its own runtime dependencies.
#
# Hints: DNNL_ROOT (CMake variable or environment), e.g. an oneAPI install.
# Result: DNNL_FOUND, DNNL_VERSION, DNNL_INCLUDE_DIR, DNNL_LIBRARY and the target DNNL::dnnl.
find_path(DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.h
          HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES include)
find_library(DNNL_LIBRARY NAMES dnnl
             HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES lib lib64)
set(DNNL_VERSION "")
if(DNNL_INCLUDE_DIR AND EXISTS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _dnnl_v
       REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define DNNL_VERSION_${_part} +([0-9]+).*" "\\1" _dnnl_${_part} "${_dnnl_v}")
  endforeach()
  set(DNNL_VERSION "${_dnnl_MAJOR}.${_dnnl_MINOR}.${_dnnl_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR
                                  VERSION_VAR DNNL_VERSION)
if(DNNL_FOUND AND NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
mark_as_advanced(DNNL_INCLUDE_DIR DNNL_LIBRARY)
