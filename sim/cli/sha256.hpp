// sha256: the SHA-256 of an input file for a manifest (OpenSSL EVP). A front-end's concern:
// the library (and so the Python module) links no OpenSSL.
#pragma once

#include <string>

namespace fp8sim::cli {

// The SHA-256 of a file's bytes as 64 lowercase hex digits. Throws
// std::runtime_error("<path>: ...") when the file cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace fp8sim::cli
