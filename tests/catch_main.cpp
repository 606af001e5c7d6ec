// catch_main: the shared Catch2 main of every test binary (Catch2's implementation is
// catch_session.cpp, compiled once for this main and gpu_main.cpp).
#include "catch_session.hpp"

int main(int argc, char** argv) { return fp8sim::test::run_catch_session(argc, argv); }
