// Sanitized builds (M3IDX_SANITIZE): scripts/test's sanitizer options (see there why each is
// needed), compiled into the unit tests. ctest gives each test its ENVIRONMENT property, but
// gtest_discover_tests (CMake 3.25's GoogleTestAddTests) writes a list's entries as separate
// arguments of set_tests_properties, so the discovered tests got only the first entry
// (M3IDX_CACHE_DIR): a plain `ctest` in build-sanitize ran them under ASan's defaults. The
// sanitizer runtimes read these before the environment, which still overrides them. The strings
// are tests/CMakeLists.txt's, the same ones the other tests get in their environment.
extern "C" const char *__asan_default_options() { return M3IDX_ASAN_OPTIONS; }
extern "C" const char *__ubsan_default_options() { return M3IDX_UBSAN_OPTIONS; }
