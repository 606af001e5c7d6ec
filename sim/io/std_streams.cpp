// std_streams: closed standard descriptors guarded, stdout checked at exit, printable text.
#include "io/std_streams.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/limits.hpp"

namespace fp8sim {

void guard_standard_descriptors() {
  for (const int fd : {0, 1, 2}) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int got = ::open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY));
    if (got >= 0 && got != fd) {  // lower numbers were free: should not happen (0..fd-1 open)
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

std::string finish_stdout() {
  errno = 0;
  bool bad = std::fflush(stdout) != 0 || std::ferror(stdout);
  int err = bad ? errno : 0;
  if (std::fclose(stdout) != 0 && !bad) {
    bad = true;
    err = errno;
  }
  if (!bad) return "";
  return fmt::format("standard output: write failed: {}", std::strerror(err ? err : EIO));
}

void print_stderr(std::string_view text) noexcept {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

std::string printable(const std::string& text) { return limits::quoted(text, std::string::npos); }

}  // namespace fp8sim
