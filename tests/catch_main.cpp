// catch_main: the shared Catch2 main of every test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
