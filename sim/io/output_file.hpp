// output_file: every file fp8sim writes appears whole or not at all.
//
// A regular file (or a path that does not exist yet) is written to a unique temporary in the
// target folder (mkstemp: "<path>.tmp-XXXXXX", so no existing file, e.g. a user's
// "<path>.tmp", is ever opened), which is closed, checked and then renamed onto <path>. A
// symlink to a regular file is followed: the temporary sits beside the link's target and
// replaces the target, so the link stays a link. On any failure (full disk, file size limit,
// I/O error) the temporary is removed, <path> is left as it was, and std::runtime_error says
// "<path>: <what failed>: <strerror>". A fatal signal (every signal whose default action ends
// the process, SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGUSR1, SIGPIPE, SIGXFSZ, ... and the
// real-time ones, while at its default action) removes every live temporary before the
// process dies of it (signal-safe: unlink(2) only); the temporary is created and registered
// with those signals held back in the calling thread, so none finds it unlisted. A file
// replaced keeps its permissions; a read-only one (no write bit, or not writable by you) is
// refused with one line, never replaced.
//
// A special file named as output is never replaced by a regular file: a character device
// (/dev/null, a terminal) or a FIFO (/dev/stdout, /proc/self/fd/N as a pipe) is written
// through in place, opened without blocking (a FIFO with no reader is an error, not
// a hang); there is nothing to make atomic there. A folder, a block device and a symlink
// whose target does not exist are refused with one line, and so is a socket (open(2) cannot
// open one).
//
// The npy writer, the JSON reports, the analyze outputs, the experiments' CSVs and manifests
// and fp8sim-hw's captures all write through here.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8sim {

class OutputFile {
 public:
  explicit OutputFile(std::string path);  // creates the temporary; throws when it cannot
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();                          // removes the temporary unless commit() succeeded

  void write(const void* data, std::size_t bytes);  // all of it, or throws
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit() { close(); publish(); }   // close, check, rename onto the path

  // commit() in two steps, for a set of files that appear together (commit_all).
  void close();                           // close and check; the temporary stays
  void publish();                         // rename onto the path (no-op when written through)

  bool written_through() const { return through_; }  // a special file, written in place
  const std::string& target() const { return target_; }  // the file replaced

 private:
  void fail(const char* what, int err);
  std::string path_, target_, tmp_;       // target_: path_ with a final symlink resolved
  int fd_ = -1;
  int slot_ = -1;                         // the signal handler's entry for tmp_
  unsigned mode_ = 0;                     // the replaced file's permissions (0: a new file)
  bool through_ = false, closed_ = false, done_ = false;
};

// Closes and checks every file, then renames them all: a failure while closing leaves no
// new file; a failure while renaming (rare: the folder changed under us) removes the files
// of this set already renamed. Either way none of the set is left and the error is thrown.
void commit_all(std::span<OutputFile> files);

// The whole file in one call.
void write_file(const std::string& path, std::string_view contents);

// Several whole files that appear together (commit_all): (path, contents) pairs.
void write_files(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace fp8sim
