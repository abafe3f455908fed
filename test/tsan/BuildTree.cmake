# cmake -P BuildTree.cmake: configures and builds the ThreadSanitizer tree
# (test/tsan/CMakeLists.txt), run by the main tree's ctest as the fixture
# of the `tsan` tests. Only the runtime half and the targets those tests run
# are built, so a fresh tree costs a few minutes and an unchanged one a
# few seconds.
#
# Expects -DSOURCE_DIR -DBINARY_DIR -DGENERATOR -DJOBS and the -DCONFIGURE
# list of cache settings (';'-separated) the main tree passes on.
foreach(var SOURCE_DIR BINARY_DIR GENERATOR JOBS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "BuildTree.cmake needs -D${var}")
  endif()
endforeach()
set(args)
foreach(setting IN LISTS CONFIGURE)
  list(APPEND args "-D${setting}")
endforeach()
# -O1 (ThreadSanitizer's documentation asks for -O1 or more): the tree
# builds a sixth faster than at -O3, and the tests run as fast (the
# instrumentation, not the optimiser, sets their pace).
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
          ${args} "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
          "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG"
          -DBRAID_SANITIZE=thread -DBRAID_BUILD_COMPILER=OFF
          -DBRAID_BUILD_BENCH=OFF -DBRAID_ENABLE_CUDA=OFF
          -DBRAID_BUILD_TESTS=ON -DBRAID_TSAN_TESTS=OFF
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring the ThreadSanitizer tree ${BINARY_DIR} failed")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target braid-tsan-targets
          -j ${JOBS}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "building the ThreadSanitizer tree ${BINARY_DIR} failed")
endif()
