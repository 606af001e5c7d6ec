// catch_session: Catch2's implementation (its session, reporters, matchers), compiled once for
// every test binary (Catch2 2.x's CATCH_CONFIG_RUNNER: the implementation without a main);
// catch_main.cpp and gpu_main.cpp hold only their main().
#define CATCH_CONFIG_RUNNER
#include "catch_session.hpp"

#include <catch2/catch.hpp>

int fp8sim::test::run_catch_session(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}
