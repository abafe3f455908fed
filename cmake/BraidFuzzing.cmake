# braid_add_fuzzer(<name> SOURCE <files...> CORPUS <dir> LIBS <targets...>)
# With BRAID_FUZZ=ON (clang): a libFuzzer binary with ASan and UBSan.
# Otherwise: the same entry point linked with StandaloneFuzzMain.cpp, and a
# ctest that replays the seed corpus.
function(braid_add_fuzzer name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCE;LIBS" ${ARGN})
  if(BRAID_FUZZ)
    add_executable(${name} ${ARG_SOURCE})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -g)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  else()
    add_executable(${name} ${ARG_SOURCE} ${PROJECT_SOURCE_DIR}/test/fuzz/StandaloneFuzzMain.cpp)
    if(BRAID_BUILD_TESTS)
      add_test(NAME ${name}-corpus COMMAND ${name} ${ARG_CORPUS})
      set_tests_properties(${name}-corpus PROPERTIES LABELS "fuzz")
    endif()
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
endfunction()
