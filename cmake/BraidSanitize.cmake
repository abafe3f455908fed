# BRAID_SANITIZE=thread builds every library and executable with
# ThreadSanitizer. It serves the race checks of the multi-stream and
# multi-rank CPU tests (test/tsan: a second, small build tree that the main
# tree's ctest configures, builds and runs, label `tsan`).
set(BRAID_SANITIZE "" CACHE STRING "Build with a sanitizer: thread, or empty")
set_property(CACHE BRAID_SANITIZE PROPERTY STRINGS "" thread)

if(BRAID_SANITIZE STREQUAL "thread")
  if(BRAID_FUZZ)
    message(FATAL_ERROR "BRAID_SANITIZE=thread and BRAID_FUZZ (ASan) exclude each other")
  endif()
  # -g1: file and line in the reports, at a fraction of -g's build time.
  add_compile_options(-fsanitize=thread -g1)
  add_link_options(-fsanitize=thread)
  # Lets a source tell ThreadSanitizer of accesses it cannot see: those
  # that uninstrumented MPI makes to Braid's buffers.
  add_compile_definitions(BRAID_TSAN=1)
elseif(NOT BRAID_SANITIZE STREQUAL "")
  message(FATAL_ERROR "BRAID_SANITIZE is '${BRAID_SANITIZE}'; use thread, or leave it empty")
endif()
