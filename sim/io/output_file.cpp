// output_file: atomic file writes through a unique temporary and a rename; special files
// written through; temporaries removed on fatal signals.
#include "io/output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

#include "base/limits.hpp"

namespace fp8sim {
namespace {

// The permissions a plain open() would give: 0666 less the umask (mkstemp makes 0600).
mode_t default_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// ---- Temporaries a fatal signal removes ----------------------------------------------------
// Fixed slots, so the handler touches no heap and takes no lock: a slot is claimed
// (free -> busy), its path written, then published (busy -> live); the handler unlinks
// every live slot. NOTE: a slot freed and reclaimed while the handler reads it could hand
// the handler a half-written path; the handler then unlinks at most a name that does not
// exist, and the process dies of the signal right after.
constexpr int kSlots = 64;
enum : int { kFree = 0, kBusy = 1, kLive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];

// Every signal whose default action ends the process and that anyone can send with kill(1)
// (SIGKILL and SIGSTOP aside, which cannot be caught): the terminal's and the job control's,
// the timers', the user signals, the resource limits', the real-time ones, and the
// synchronous ones too (kill -SEGV is a signal like any other; a real fault dies of it the
// same way, after the temporaries are removed).
const std::vector<int>& fatal_signals() {
  static const std::vector<int> signals = [] {
    std::vector<int> s = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP,   SIGABRT, SIGBUS,
                          SIGFPE,  SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE,   SIGALRM, SIGTERM,
                          SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   SIGPWR,  SIGSYS};
#ifdef SIGSTKFLT
    s.push_back(SIGSTKFLT);
#endif
    for (int rt = SIGRTMIN; rt <= SIGRTMAX; ++rt) s.push_back(rt);
    return s;
  }();
  return signals;
}

sigset_t fatal_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : fatal_signals()) sigaddset(&set, sig);
  return set;
}

// Holds every fatal signal back in this thread while it lives (creating a temporary and
// registering it is then one step for the signal handler); pending ones arrive at its end.
class SignalsHeld {
 public:
  SignalsHeld() {
    const sigset_t all = fatal_signal_set();
    ::pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~SignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t old_;
};

extern "C" void remove_temporaries_and_die(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kLive) ::unlink(s.path);
  ::signal(sig, SIG_DFL);  // then die of the signal as if we had not caught it
  ::raise(sig);
}

// Installs the handler for each of fatal_signals() still at its default action, at every new
// temporary (a few system calls; a program that reset its handlers gets them back). An
// ignored signal stays ignored (`trap '' XFSZ` then makes write() fail with EFBIG instead);
// a handler someone else installed (Python's SIGINT, a test framework's) stays theirs.
void install_signal_handlers() {
  for (const int sig : fatal_signals()) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL)
      continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_die;
    sa.sa_mask = fatal_signal_set();
    ::sigaction(sig, &sa, nullptr);
  }
}

int register_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  install_signal_handlers();
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kBusy)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kLive, std::memory_order_release);
    return i;
  }
  return -1;  // more than kSlots files open at once: these go unprotected from signals
}

void unregister_temporary(int& slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree, std::memory_order_release);
  slot = -1;
}

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path, what));
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)), target_(path_) {
  // 1. What is there now: a special file is written through, a symlink followed.
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(path_, "is a folder, not a file");
    if (S_ISBLK(st.st_mode))
      refuse(path_, "is a block device (refused: fp8sim never writes into a disk)");
    if (!S_ISREG(st.st_mode)) {  // character device, FIFO, socket: in place, never blocking
      fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (fd_ < 0)
        refuse(path_, S_ISSOCK(st.st_mode) ? std::string("is a socket (fp8sim writes files, "
                                                         "devices and pipes, not sockets)")
                      : errno == ENXIO ? std::string("a FIFO with no reader")
                                       : fmt::format("cannot open: {}", std::strerror(errno)));
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
      through_ = true;
      return;
    }
    char resolved[PATH_MAX];
    if (::realpath(path_.c_str(), resolved) != nullptr) target_ = resolved;
    // A file you cannot write is not replaced (rename(2) would, whatever its mode); one you
    // can keeps its permissions, as cp and editors keep them.
    if ((st.st_mode & 0222) == 0 || ::access(target_.c_str(), W_OK) != 0)
      refuse(path_, fmt::format("is read-only (mode {:04o}): fp8sim does not replace a file "
                                "you cannot write (chmod u+w it, or write elsewhere)",
                                st.st_mode & 07777));
    mode_ = st.st_mode & 0777;
  } else if (errno != ENOENT) {
    refuse(path_, fmt::format("cannot stat: {}", std::strerror(errno)));
  } else if (struct stat lst {}; ::lstat(path_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    refuse(path_, "a symlink whose target does not exist");
  }
  // 2. A regular file or a new one: a unique temporary beside the target.
  std::vector<char> name(target_.begin(), target_.end());
  for (const char c : std::string_view(".tmp-XXXXXX")) name.push_back(c);
  name.push_back('\0');
  {
    // Created and registered with every fatal signal held back: no signal finds it unlisted.
    const SignalsHeld held;
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ < 0) fail("cannot create a temporary file in its folder", errno);
    tmp_ = name.data();
    slot_ = register_temporary(tmp_);
  }
  if (::fchmod(fd_, mode_ != 0 ? mode_ : default_mode()) != 0)
    fail("cannot set permissions", errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  unregister_temporary(slot_);
}

void OutputFile::fail(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  unregister_temporary(slot_);
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

void OutputFile::close() {
  if (closed_) throw std::logic_error(fmt::format("{}: closed twice", path_));
  const int fd = fd_;
  fd_ = -1;
  closed_ = true;
  if (::close(fd) != 0) fail("close failed", errno);
}

void OutputFile::publish() {
  if (!closed_ || done_) throw std::logic_error(fmt::format("{}: publish out of order", path_));
  if (!through_ && std::rename(tmp_.c_str(), target_.c_str()) != 0)
    fail("cannot rename the finished file into place", errno);
  done_ = true;
  unregister_temporary(slot_);
}

namespace {

void commit_set(const std::vector<OutputFile*>& files) {
  for (OutputFile* f : files) f->close();  // throws: every temporary is removed by its owner
  std::size_t published = 0;
  try {
    for (; published < files.size(); ++published) files[published]->publish();
  } catch (...) {
    // The files already renamed replaced their old versions: removing them leaves none of
    // the set rather than a mix. (A written-through special file cannot be taken back.)
    for (std::size_t i = 0; i < published; ++i)
      if (!files[i]->written_through()) ::unlink(files[i]->target().c_str());
    throw;
  }
}

}  // namespace

void commit_all(std::span<OutputFile> files) {
  std::vector<OutputFile*> p;
  for (OutputFile& f : files) p.push_back(&f);
  commit_set(p);
}

void write_file(const std::string& path, std::string_view contents) {
  OutputFile f(path);
  f.write(contents);
  f.commit();
}

void write_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::deque<OutputFile> out;  // OutputFile does not move: a deque keeps them in place
  std::vector<OutputFile*> p;
  for (const auto& [path, text] : files) {
    out.emplace_back(path);
    out.back().write(text);
    p.push_back(&out.back());
  }
  commit_set(p);
}

}  // namespace fp8sim
