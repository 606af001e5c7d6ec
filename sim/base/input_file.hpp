// input_file: opening a file fp8sim reads, refusing what is not a regular file.
//
// A FIFO, device or folder named as input is refused at once (opened O_NONBLOCK, then
// checked with fstat), and the file's size is known before anything is allocated for it.
// Every error is std::runtime_error("<path>: <problem>").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fp8sim {

class InputFile {
 public:
  // Opens `path`; throws if it cannot be opened, is not a regular file or is larger than
  // max_bytes (the message names `limit_name`, a limits.hpp constant).
  InputFile(std::string path, std::uint64_t max_bytes, const char* limit_name);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  std::uint64_t left() const { return size_ - pos_; }  // bytes not yet read

  // Reads exactly n bytes; false when the file ends first.
  bool read(void* out, std::size_t n);
  // The rest of the file as text.
  std::string read_rest();

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0, pos_ = 0;
};

}  // namespace fp8sim
