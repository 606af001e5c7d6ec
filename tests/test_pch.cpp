// test_pch.cpp: the one source of fp8sim_test_pch, the target that builds the tests' precompiled
// header (test_pch.hpp; CMake builds a target's header only with a source to compile).
// Nothing of its own: no test binary links it.
