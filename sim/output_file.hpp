// output_file: every file fp8sim writes appears whole or not at all.
//
// The bytes go to a unique temporary in the target folder (mkstemp: "<path>.tmp-XXXXXX", so
// no existing file, e.g. a user's "<path>.tmp", is ever opened), which is closed, checked and
// then renamed onto <path>. On any failure (full disk, file size limit, I/O error) the
// temporary is removed, <path> is left as it was, and std::runtime_error says
// "<path>: <what failed>: <strerror>". The npy writer, the JSON reports, the experiments'
// CSVs and manifests and fp8sim-hw's captures all write through here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp8sim {

class OutputFile {
 public:
  explicit OutputFile(std::string path);  // creates the temporary; throws when it cannot
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();                          // removes the temporary unless commit() succeeded

  void write(const void* data, std::size_t bytes);  // all of it, or throws
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();                          // close, check, rename onto the path

 private:
  void fail(const char* what, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  bool done_ = false;
};

// The whole file in one call.
void write_file(const std::string& path, std::string_view contents);

}  // namespace fp8sim
