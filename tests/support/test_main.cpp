#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

// Where the build put things. ctest's ENVIRONMENT property cannot carry a list
// through catch_discover_tests, so the paths are compiled in; a variable already
// set in the environment wins.
int main(int argc, char** argv)
{
    ::setenv("ORCH_BIN_DIR", ORCH_TEST_BIN_DIR, 0);
    ::setenv("TEST_PROGRAMS_DIR", ORCH_TEST_PROGRAMS_DIR, 0);
    ::setenv("ORCH_SOURCE_DIR", ORCH_TEST_SOURCE_DIR, 0);
    return Catch::Session().run(argc, argv);
}
