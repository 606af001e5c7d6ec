// npy: a strict reader and an atomic writer for NumPy .npy files.
#include "io/npy.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <new>
#include <stdexcept>

#include "base/input_file.hpp"
#include "base/limits.hpp"
#include "io/output_file.hpp"

namespace fp8sim {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path, what));
}

std::size_t descr_size(const std::string& d) {
  if (d == "|u1" || d == "|i1" || d == "<u1" || d == "<i1") return 1;
  if (d == "<u2" || d == "<i2" || d == "<f2") return 2;
  if (d == "<V2" || d == "|V2") return 2;  // np.save of an ml_dtypes.bfloat16 array
  if (d == "<u4" || d == "<i4" || d == "<f4") return 4;
  if (d == "<u8" || d == "<i8" || d == "<f8") return 8;
  return 0;
}

// A tiny parser for the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct HeaderParser {
  const std::string& s;
  const std::string& path;
  std::size_t i = 0;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(path, fmt::format("malformed npy header: expected '{}' at offset {}", c, i));
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail(path, "malformed npy header: expected a string");
    const char q = s[i++];
    const auto end = s.find(q, i);
    if (end == std::string::npos) fail(path, "malformed npy header: unterminated string");
    std::string out = s.substr(i, end - i);
    i = end + 1;
    return out;
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) return i += 4, true;
    if (s.compare(i, 5, "False") == 0) return i += 5, false;
    fail(path, "malformed npy header: expected True or False");
  }
  std::vector<std::size_t> shape() {
    expect('(');
    std::vector<std::size_t> dims;
    while (!eat(')')) {
      ws();
      std::uint64_t v = 0;
      const std::size_t start = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, unsigned(s[i++] - '0'), &v))
          fail(path, "npy shape dimension does not fit in 64 bits");
      }
      if (i == start) fail(path, "malformed npy header: bad shape");
      if (dims.size() == limits::kMaxNpyRank)
        fail(path, fmt::format("npy shape has more than {} dimensions {}", limits::kMaxNpyRank,
                               limits::named("kMaxNpyRank", limits::kMaxNpyRank)));
      dims.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
};

// "(3, *)": a 0 read as "any extent" is written "*" when zero_is_any.
std::string show_shape(const std::vector<std::size_t>& s, bool zero_is_any) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + (s[i] || !zero_is_any ? std::to_string(s[i]) : std::string("*"));
  return out + ")";
}

}  // namespace

std::size_t NpyArray::size() const {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}
std::size_t NpyArray::item_size() const { return descr_size(descr); }

NpyReader::NpyReader(const std::string& path)
    : path_(path), in_(path, limits::kMaxFileBytes, "kMaxFileBytes") {
  InputFile& in = in_;
  unsigned char magic[8];
  if (!in.read(magic, 8) || std::string(reinterpret_cast<char*>(magic), 6) != "\x93NUMPY")
    fail(path, "not an npy file (bad magic)");
  const int major = magic[6];
  std::size_t hlen = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(b, 2)) fail(path, "truncated npy header");
    hlen = b[0] | (std::size_t(b[1]) << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(b, 4)) fail(path, "truncated npy header");
    hlen = b[0] | (std::size_t(b[1]) << 8) | (std::size_t(b[2]) << 16) | (std::size_t(b[3]) << 24);
  } else {
    fail(path, fmt::format("unsupported npy version {}", major));
  }
  if (hlen > limits::kMaxNpyHeaderBytes)
    fail(path, fmt::format("npy header of {} bytes is too long {}", hlen,
                           limits::named("kMaxNpyHeaderBytes", limits::kMaxNpyHeaderBytes)));
  if (hlen > in.left()) fail(path, "truncated npy header");
  std::string header(hlen, '\0');
  if (!in.read(header.data(), hlen)) fail(path, "truncated npy header");

  NpyArray& a = head_;
  HeaderParser p{header, path};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  auto once = [&](bool& have, const std::string& key) {
    if (have) fail(path, fmt::format("malformed npy header: key '{}' given twice", key));
    have = true;
  };
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      once(have_descr, key);
      a.descr = p.str();
    } else if (key == "fortran_order") {
      once(have_order, key);
      fortran = p.boolean();
    } else if (key == "shape") {
      once(have_shape, key);
      a.shape = p.shape();
    } else {
      fail(path, fmt::format("malformed npy header: unknown key '{}'", limits::quoted(key)));
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  p.ws();  // numpy pads with spaces and ends with '\n'; anything else after '}' is refused
  if (p.i != header.size()) {
    std::string tail = header.substr(p.i);
    while (!tail.empty() && (tail.back() == ' ' || tail.back() == '\n')) tail.pop_back();
    fail(path, fmt::format("malformed npy header: '{}' after the closing brace",
                           limits::quoted(tail, 20)));
  }
  if (!have_descr || !have_order || !have_shape)
    fail(path, "malformed npy header: needs descr, fortran_order and shape");
  if (fortran) fail(path, "Fortran-order arrays are not supported (save with C order)");
  if (a.descr.size() == 3 && a.descr[0] == '>' && a.descr[2] != '1')
    fail(path, fmt::format("big-endian dtype {} is not supported", limits::quoted(a.descr)));
  if (descr_size(a.descr) == 0)
    fail(path, fmt::format("unsupported dtype '{}'", limits::quoted(a.descr)));

  // The data size from the shape, without wrapping, checked against the file before any
  // allocation.
  std::uint64_t bytes = a.item_size();
  for (const std::size_t d : a.shape)
    if (__builtin_mul_overflow(bytes, std::uint64_t{d}, &bytes))
      fail(path, fmt::format("shape ({}) has more bytes than fit in 64 bits",
                             fmt::join(a.shape, ", ")));
  const std::uint64_t left = in.left();
  if (bytes != left)
    fail(path, fmt::format("data section {} than the shape needs ({} bytes for shape ({}), "
                           "the file holds {})",
                           bytes > left ? "shorter" : "longer", bytes, fmt::join(a.shape, ", "), left));
}

void NpyReader::expect(const std::string& descr, const std::vector<std::size_t>& shape) const {
  check(descr, shape, /*zero_is_any=*/true);
}

void NpyReader::expect_exactly(const std::string& descr,
                               const std::vector<std::size_t>& shape) const {
  check(descr, shape, /*zero_is_any=*/false);
}

void NpyReader::check(const std::string& descr, const std::vector<std::size_t>& shape,
                      bool zero_is_any) const {
  auto same = [](const std::string& x, const std::string& y) {
    // |u1 and <u1 are the same dtype.
    auto norm = [](std::string d) {
      if (d.size() == 3 && d[2] == '1') d[0] = '|';
      return d;
    };
    return norm(x) == norm(y);
  };
  if (!same(head_.descr, descr))
    fail(path_, fmt::format("expected dtype {}, got {}", descr, head_.descr));
  bool ok = head_.shape.size() == shape.size();
  for (std::size_t i = 0; ok && i < shape.size(); ++i)
    ok = (zero_is_any && shape[i] == 0) || shape[i] == head_.shape[i];
  if (!ok)
    fail(path_, fmt::format("expected shape {}, got {}", show_shape(shape, zero_is_any),
                            show_shape(head_.shape, /*zero_is_any=*/false)));
}

NpyArray NpyReader::read() {
  NpyArray a;
  a.descr = head_.descr;
  a.shape = head_.shape;
  const std::uint64_t bytes = in_.left();
  try {
    a.data.resize(bytes);
  } catch (const std::bad_alloc&) {
    fail(path_, fmt::format("cannot allocate {} bytes for its data", bytes));
  }
  if (bytes && !in_.read(a.data.data(), bytes)) fail(path_, "file shrank while being read");
  return a;
}

NpyArray read_npy(const std::string& path) { return NpyReader(path).read(); }

NpyArray read_npy_checked(const std::string& path, const std::string& descr,
                          const std::vector<std::size_t>& shape) {
  NpyReader r(path);
  r.expect(descr, shape);
  return r.read();
}

void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::size_t>& shape, const void* data, std::size_t bytes) {
  NpyArray check;
  check.descr = descr;
  check.shape = shape;
  if (check.size() * check.item_size() != bytes)
    fail(path, fmt::format("{} bytes do not fill shape of {} elements of {}", bytes, check.size(),
                           descr));
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(3,)" for 1-d, "(3, 4)" otherwise
  if (shape.size() > 1 && dims.back() == ',') dims.pop_back();
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Pad so that magic(6)+version(2)+len(2)+header is a multiple of 64, ending in '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                 static_cast<unsigned char>(header.size() & 0xff),
                                 static_cast<unsigned char>(header.size() >> 8)};
  OutputFile out(path);
  out.write(pre, 10);
  out.write(header);
  out.write(data, bytes);
  out.commit();
}

}  // namespace fp8sim
