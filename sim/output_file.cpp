// output_file: atomic file writes through a unique temporary and a rename.
#include "output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace fp8sim {
namespace {

// The permissions a plain open() would give: 0666 less the umask (mkstemp makes 0600).
mode_t default_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  std::vector<char> name(path_.begin(), path_.end());
  for (const char c : std::string_view(".tmp-XXXXXX")) name.push_back(c);
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail("cannot create a temporary file in its folder", errno);
  tmp_ = name.data();
  if (::fchmod(fd_, default_mode()) != 0) fail("cannot set permissions", errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::fail(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw std::runtime_error(fmt::format("{}: {}: {}", path_, what, std::strerror(err)));
}

void OutputFile::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw std::logic_error(fmt::format("{}: write after commit", path_));
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void OutputFile::commit() {
  if (fd_ < 0) throw std::logic_error(fmt::format("{}: commit twice", path_));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail("cannot rename the finished file into place", errno);
  done_ = true;
}

void write_file(const std::string& path, std::string_view contents) {
  OutputFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace fp8sim
