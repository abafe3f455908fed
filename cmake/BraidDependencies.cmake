# Finds every dependency of the build. The runtime (braid-run and every emitted
# training binary) links protobuf, abseil and OpenBLAS statically so that it can
# be copied to a node that has none of our Debian packages; see DESIGN.md,
# "Deployment".

find_package(Threads REQUIRED)

# --- Protobuf (static) -------------------------------------------------------
set(Protobuf_USE_STATIC_LIBS ON)
find_package(Protobuf REQUIRED)

# --- abseil (static) ---------------------------------------------------------
# Debian's abslConfig imports the shared objects; the archives sit beside them.
# Point every imported absl target at its archive so that CMake's transitive
# link interface yields a correctly ordered static link line.
find_package(absl REQUIRED)
function(braid_use_static_absl)
  get_directory_property(_targets IMPORTED_TARGETS)
  foreach(_t IN LISTS _targets)
    if(NOT _t MATCHES "^absl::")
      continue()
    endif()
    get_target_property(_type ${_t} TYPE)
    if(NOT _type STREQUAL "SHARED_LIBRARY")
      continue()
    endif()
    get_target_property(_loc ${_t} IMPORTED_LOCATION_NONE)
    if(_loc)
      string(REGEX REPLACE "\\.so[.0-9]*$" ".a" _archive "${_loc}")
      if(EXISTS "${_archive}")
        set_target_properties(${_t} PROPERTIES
          IMPORTED_LOCATION_NONE "${_archive}"
          IMPORTED_SONAME_NONE "")
      endif()
    endif()
  endforeach()
endfunction()
braid_use_static_absl()

# --- OpenBLAS (static) -------------------------------------------------------
find_path(BRAID_CBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas
  NO_DEFAULT_PATH)
find_library(BRAID_OPENBLAS_STATIC NAMES libopenblas.a
  PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu
  NO_DEFAULT_PATH)
if(NOT BRAID_CBLAS_INCLUDE_DIR OR NOT BRAID_OPENBLAS_STATIC)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev")
endif()
add_library(braid_openblas INTERFACE)
target_include_directories(braid_openblas INTERFACE ${BRAID_CBLAS_INCLUDE_DIR})
target_link_libraries(braid_openblas INTERFACE ${BRAID_OPENBLAS_STATIC}
  Threads::Threads m)

# --- CLI11 (header-only) -----------------------------------------------------
# braid-run's command-line parser.
find_path(BRAID_CLI11_INCLUDE_DIR CLI/CLI.hpp)
if(NOT BRAID_CLI11_INCLUDE_DIR)
  message(FATAL_ERROR "CLI11 not found (CLI/CLI.hpp): install libcli11-dev")
endif()
add_library(braid_cli11 INTERFACE)
target_include_directories(braid_cli11 INTERFACE ${BRAID_CLI11_INCLUDE_DIR})

# --- Tests and benchmarks ----------------------------------------------------
if(BRAID_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(BRAID_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# --- MLIR (compiler only) ----------------------------------------------------
if(BRAID_BUILD_COMPILER)
  if(NOT MLIR_DIR)
    set(MLIR_DIR /usr/lib/llvm-22/lib/cmake/mlir)
  endif()
  find_package(MLIR REQUIRED CONFIG)
  message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")
  list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
  include(TableGen)
  include(AddLLVM)
  include(AddMLIR)
  include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  add_definitions(${LLVM_DEFINITIONS})
  if(NOT LLVM_EXTERNAL_LIT)
    set(LLVM_EXTERNAL_LIT /usr/lib/llvm-22/bin/lit)
  endif()
endif()

# --- CUDA (optional) ---------------------------------------------------------
# Where nvcc exists (BRAID_ENABLE_CUDA AUTO or ON) the build gains the CUDA
# kernels and the runtime's CUDA backend. braid-run then links the CUDA
# runtime statically and nothing else from CUDA: cuBLASLt is loaded with
# dlopen by kernels/cuda, and the driver by the CUDA runtime itself, so the
# same binary starts on CPU-only nodes (docs/gpu-backend.md, "Deployment").
set(BRAID_HAVE_CUDA OFF)
if(NOT BRAID_ENABLE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100/H200) unless the user asks for others. Must be set before
    # enable_language, which would otherwise pick nvcc's oldest default.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING
        "GPU architectures the CUDA kernels are compiled for" FORCE)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(BRAID_HAVE_CUDA ON)
  elseif(BRAID_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BRAID_ENABLE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(BRAID_HAVE_CUDA)
  message(STATUS "Braid: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
    "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "Braid: CUDA backend OFF (no nvcc, or BRAID_ENABLE_CUDA=OFF)")
endif()
