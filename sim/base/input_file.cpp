// input_file: regular files only, opened without blocking, size checked before reading.
#include "base/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "base/limits.hpp"

namespace fp8sim {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path, what));
}

}  // namespace

InputFile::InputFile(std::string path, std::uint64_t max_bytes, const char* limit_name)
    : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(path_, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(path_, fmt::format("cannot stat: {}", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(path_, S_ISDIR(st.st_mode) ? "is a folder, not a file" : "not a regular file");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    fail(path_, fmt::format("file of {} bytes is too large {}", size_,
                            limits::named(limit_name, max_bytes)));
  }
}

InputFile::~InputFile() { ::close(fd_); }

bool InputFile::read(void* out, std::size_t n) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::read(fd_, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, fmt::format("read failed: {}", std::strerror(errno)));
    if (got == 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    pos_ += static_cast<std::uint64_t>(got);
  }
  return true;
}

std::string InputFile::read_rest() {
  std::string text(left(), '\0');
  if (!read(text.data(), text.size())) fail(path_, "file shrank while being read");
  return text;
}

}  // namespace fp8sim
