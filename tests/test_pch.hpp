// test_pch: the headers that most Catch2 test files include, precompiled once for all of them
// (tests/CMakeLists.txt, FP8SIM_TEST_PCH). Each test file still includes what it uses: this
// list only decides what is parsed once instead of once per file.
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>
