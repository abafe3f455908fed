# braid_add_gtest(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>])
# Builds one GoogleTest binary and registers it with ctest as one test.
function(braid_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    BRAID_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    BRAID_BINARY_DIR="${PROJECT_BINARY_DIR}"
    BRAID_DATA_DIR="${BRAID_DATA_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}")
endfunction()

# braid_add_gpu_test(<name> [NEEDS_NCCL] SOURCES <files...> LIBS <targets...>)
# A GoogleTest binary labelled `gpu`. Its main exits with 77 when no CUDA
# device is usable (with NEEDS_NCCL: or NCCL cannot be loaded), which ctest
# reports as skipped (test/gpu/GpuTestMain.cpp).
function(braid_add_gpu_test name)
  cmake_parse_arguments(ARG "NEEDS_NCCL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/test/gpu/GpuTestMain.cpp)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} braid_cuda_kernels GTest::gtest
    CUDA::cudart_static)
  target_compile_definitions(${name} PRIVATE
    BRAID_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    BRAID_BINARY_DIR="${PROJECT_BINARY_DIR}"
    BRAID_DATA_DIR="${BRAID_DATA_DIR}")
  if(ARG_NEEDS_NCCL)
    target_link_libraries(${name} PRIVATE braid_runtime)
    target_compile_definitions(${name} PRIVATE BRAID_GPU_TEST_NEEDS_NCCL=1)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77)
endfunction()
