// catch_session: runs Catch2's session on the command line (catch_session.cpp, Catch2's
// implementation compiled once for every test binary); the mains call it.
#pragma once

namespace fp8sim::test {
int run_catch_session(int argc, char** argv);
}  // namespace fp8sim::test
