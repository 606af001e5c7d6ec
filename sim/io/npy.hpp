// npy: reading and writing NumPy .npy files (format versions 1.0-3.0, C order only).
//
// A small strict reader, because every malformed or mismatched file must end in a one-line
// error naming the file and the problem (xtensor's xnpy, the one packaged alternative, pulls
// in xtensor and reports some malformed headers by assertion).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/input_file.hpp"

namespace fp8sim {

// dtype spellings as in the header's 'descr': "|u1", "<f4", "<f8", "<u2", "<u4", "<i4", "<i8".
struct NpyArray {
  std::string descr;
  std::vector<std::size_t> shape;
  std::vector<std::uint8_t> data;  // raw little-endian bytes, C order

  std::size_t size() const;        // product of the shape (1 for a 0-d array)
  std::size_t item_size() const;   // bytes per element from descr
  template <class T> std::vector<T> as() const;  // copies data out; caller checked descr
};

// An opened .npy file whose header is read and checked, none of its data yet: the cheap
// checks (dtype, rank, shape against another operand, size limits) come before the data is
// read. Throws std::runtime_error("<path>: <problem>") for a missing file, a file that is
// not a regular file (a FIFO is refused without blocking), bad magic, unsupported version, a
// malformed header (a key given twice included), Fortran order, big-endian or unknown dtype,
// a shape whose size overflows, or a data section whose length does not match the shape:
// the shape is checked against the file's size before anything is allocated (limits.hpp:
// kMaxFileBytes, kMaxNpyHeaderBytes, kMaxNpyRank).
class NpyReader {
 public:
  explicit NpyReader(const std::string& path);
  const std::string& path() const { return path_; }
  const std::string& descr() const { return head_.descr; }
  const std::vector<std::size_t>& shape() const { return head_.shape; }
  // Throws unless the dtype is `descr` and the shape `shape` (a 0 in `shape` matches any
  // extent): "<path>: expected dtype <f4, got |u1", "<path>: expected shape (3, *), got (4,)".
  void expect(const std::string& descr, const std::vector<std::size_t>& shape) const;
  // As expect, every extent exact (0 matches only 0): for an operand whose shape follows
  // from the others' (C is M x N, a bias N) where M or N may be 0.
  void expect_exactly(const std::string& descr, const std::vector<std::size_t>& shape) const;
  NpyArray read();  // the header and the data (once)

 private:
  void check(const std::string& descr, const std::vector<std::size_t>& shape,
             bool zero_is_any) const;
  std::string path_;
  InputFile in_;
  NpyArray head_;   // descr and shape; no data
};

// NpyReader(path).read(): the whole file, checked.
NpyArray read_npy(const std::string& path);

// NpyReader(path), expect(descr, shape), then read(): a mismatch is found before the data
// is read.
NpyArray read_npy_checked(const std::string& path, const std::string& descr,
                          const std::vector<std::size_t>& shape);

// Writes a C-order array (version 1.0) through OutputFile (output_file.hpp): a failed run
// never leaves a partial output file. Throws std::runtime_error on I/O failure.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::size_t>& shape, const void* data, std::size_t bytes);

template <class T>
std::vector<T> NpyArray::as() const {
  std::vector<T> out(data.size() / sizeof(T));
  if (!out.empty()) __builtin_memcpy(out.data(), data.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace fp8sim
