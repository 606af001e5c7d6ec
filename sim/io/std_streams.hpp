// std_streams: the standard streams of a command-line tool, checked like any output file.
//
// A tool's stdout is an output like D.npy: a write error there (a full disk, `> /dev/full`,
// a closed stream `>&-`, a reader gone) must end in exit 2 with one line, not exit 0. And an
// error message must stay one printable line whatever bytes an input put in it.
#pragma once

#include <string>
#include <string_view>

namespace fp8sim {

// Call first in main(): file descriptors 0, 1 and 2 that are closed are reopened on
// /dev/null the wrong way round (stdin write-only, stdout and stderr read-only), so no file
// the tool opens later takes one of their numbers and every write to a closed stdout still
// fails (EBADF) instead of landing in an output file.
void guard_standard_descriptors();

// Flushes and closes stdout and returns "" when every byte reached it, else one line
// "standard output: write failed: <strerror>". Call once, last.
std::string finish_stdout();

// Writes `text` to stderr and flushes it, never throwing: a closed or full stderr (`2>&-`,
// `2>/dev/full`) loses the message but not the exit code (fmt::print would throw there, and a
// throw from an error handler aborts the process).
void print_stderr(std::string_view text) noexcept;

// `text` as one printable line: control characters and other non-printing bytes written
// as \xNN (an error message quoting a manifest string, a case name on the terminal).
std::string printable(const std::string& text);

}  // namespace fp8sim
