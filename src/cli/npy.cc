#include "cli/npy.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace octet {

namespace {

struct NpyType {
  const char* descr;  // the little-endian descr octet writes and accepts
  DType dtype;
};

// Standard numpy types. 1-byte types are written with '|' but also read with '<'.
constexpr std::array<NpyType, 12> kNpyTypes = {{{"|b1", DType::kBool},
                                                {"|i1", DType::kInt8},
                                                {"|u1", DType::kUInt8},
                                                {"<i2", DType::kInt16},
                                                {"<u2", DType::kUInt16},
                                                {"<i4", DType::kInt32},
                                                {"<u4", DType::kUInt32},
                                                {"<i8", DType::kInt64},
                                                {"<u8", DType::kUInt64},
                                                {"<f2", DType::kFloat16},
                                                {"<f4", DType::kFloat32},
                                                {"<f8", DType::kFloat64}}};

struct NpyArray {
  std::string descr;
  Shape shape;
  bool fortran_order = false;
  std::string data;  // raw element bytes as stored
};

// Finds `'key':` in the header dict and returns the text after the colon.
std::string NpyHeaderField(const std::string& header, const std::string& key,
                           const std::string& where) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos) Fail(where, ": NPY header has no '", key, "' field");
  pos = header.find(':', pos);
  if (pos == std::string::npos) Fail(where, ": malformed NPY header");
  pos = header.find_first_not_of(' ', pos + 1);
  return pos == std::string::npos ? std::string() : header.substr(pos);
}

NpyArray ParseNpy(const std::string& bytes, const std::string& where) {
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    Fail(where, ": not an NPY file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) Fail(where, ": truncated NPY header");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    Fail(where, ": unsupported NPY format version ", major);
  }
  if (bytes.size() < header_start + header_len) Fail(where, ": truncated NPY header");
  const std::string header = bytes.substr(header_start, header_len);

  NpyArray array;
  std::string descr = NpyHeaderField(header, "descr", where);
  if (descr.empty() || descr[0] != '\'')
    Fail(where, ": NPY dtype is not a simple type (structured arrays are not supported)");
  size_t close = descr.find('\'', 1);
  if (close == std::string::npos) Fail(where, ": malformed NPY descr");
  array.descr = descr.substr(1, close - 1);
  array.fortran_order = NpyHeaderField(header, "fortran_order", where).rfind("True", 0) == 0;

  std::string shape_text = NpyHeaderField(header, "shape", where);
  if (shape_text.empty() || shape_text[0] != '(') Fail(where, ": malformed NPY shape");
  size_t end = shape_text.find(')');
  if (end == std::string::npos) Fail(where, ": malformed NPY shape");
  std::stringstream dims(shape_text.substr(1, end - 1));
  std::string item;
  while (std::getline(dims, item, ',')) {
    size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;  // the trailing comma of "(3,)"
    try {
      const long long d = std::stoll(item.substr(first));
      if (d < 0) throw std::invalid_argument("negative");
      array.shape.push_back(d);
    } catch (const std::exception&) {
      Fail(where, ": malformed NPY shape '", shape_text.substr(0, end + 1), "'");
    }
  }
  array.data = bytes.substr(header_start + header_len);
  return array;
}

size_t DescrItemSize(const std::string& descr, const std::string& where) {
  try {
    return std::stoul(descr.substr(2));
  } catch (const std::exception&) {
    Fail(where, ": unsupported NPY dtype '", descr, "'");
  }
}

// The DType of an NPY array that feeds an input declared as `expected`.
// ml_dtypes types (bfloat16, float8, int4, uint4) are saved by numpy as raw
// void bytes ('<V2', '|V1'); those are taken as the input's type when its
// size matches, since the file itself does not say which of them it holds.
DType NpyDType(const std::string& descr, DType expected, const std::string& where) {
  if (descr.size() < 3) Fail(where, ": unsupported NPY dtype '", descr, "'");
  if (descr[0] == '>' && DescrItemSize(descr, where) > 1)
    Fail(where, ": big-endian NPY data ('", descr, "') is not supported; save it little-endian");
  const std::string kind_size = descr.substr(1);
  for (const NpyType& t : kNpyTypes)
    if (kind_size == std::string(t.descr).substr(1)) return t.dtype;
  if (descr[1] == 'V' || descr == "<f1") {  // ml_dtypes; float8_e5m2 says "<f1"
    const size_t size = DescrItemSize(descr, where);
    const bool ml_dtype = expected == DType::kBFloat16 || IsFloat8(expected) ||
                          expected == DType::kInt4 || expected == DType::kUInt4;
    if (ml_dtype && size == DTypeSize(expected)) return expected;
    Fail(where, ": NPY dtype '", descr, "' holds raw ", size,
         "-byte values (an ml_dtypes array?), which cannot feed an input of type ",
         DTypeName(expected));
  }
  Fail(where, ": unsupported NPY dtype '", descr, "'");
}

// Reorders a column-major (Fortran) buffer to row-major.
std::string FortranToC(const std::string& data, const Shape& shape, size_t elem) {
  const int64_t n = NumElements(shape);
  std::string out(data.size(), '\0');
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t c_pos = 0; c_pos < n; ++c_pos) {
    int64_t f_pos = 0, stride = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      f_pos += index[d] * stride;
      stride *= shape[d];
    }
    std::memcpy(&out[c_pos * elem], &data[f_pos * elem], elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

Tensor NpyToTensor(const NpyArray& array, DType expected, const std::string& where) {
  const DType dtype = NpyDType(array.descr, expected, where);
  Tensor t(dtype, array.shape);
  if (array.data.size() < t.nbytes())
    Fail(where, ": NPY data is truncated (", array.data.size(), " bytes for shape ",
         ShapeToString(array.shape), " of ", DTypeName(dtype), ", need ", t.nbytes(), ")");
  std::string data = array.data.substr(0, t.nbytes());
  if (array.fortran_order) data = FortranToC(data, array.shape, DTypeSize(dtype));
  if (!data.empty()) std::memcpy(t.raw(), data.data(), data.size());
  // ml_dtypes keeps a 4-bit value in the low nibble; octet holds int4 as int8.
  if (dtype == DType::kInt4 || dtype == DType::kUInt4) {
    uint8_t* p = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint8_t nibble = p[i] & 0x0F;
      p[i] = dtype == DType::kInt4 && nibble >= 8 ? static_cast<uint8_t>(nibble | 0xF0) : nibble;
    }
  }
  return t;
}
const char* NpyDescrFor(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return "<u2";
    case DType::kInt4:
      return "|i1";
    case DType::kUInt4:
      return "|u1";
    default:
      break;
  }
  if (IsFloat8(dtype)) return "|u1";
  for (const NpyType& t : kNpyTypes)
    if (t.dtype == dtype) return t.descr;
  Fail("cannot write a tensor of type ", DTypeName(dtype), " to NPY");
}

// ---------------------------------------------------------------- NPZ (zip)

uint32_t Crc32(const std::string& data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> tab{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      tab[i] = c;
    }
    return tab;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint64_t ReadLE(const std::string& bytes, size_t pos, int width, const std::string& where) {
  if (pos + width > bytes.size()) Fail(where, ": truncated zip structure");
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[pos + i]);
  return v;
}

void AppendLE(std::string& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

Tensor ReadNpy(const std::string& bytes, DType expected, const std::string& where) {
  return NpyToTensor(ParseNpy(bytes, where), expected, where);
}

std::string SerializeNpy(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += std::to_string(t.dim(i)) + ",";
  if (t.rank() > 1) shape.pop_back();  // numpy writes "(3,)" but "(2, 3)"
  shape += ")";
  std::string header = std::string("{'descr': '") + NpyDescrFor(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

// Entries in archive order. Only stored (uncompressed) entries are read.
std::vector<std::pair<std::string, std::string>> ReadNpz(const std::string& bytes,
                                                         const std::string& path) {
  // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
  const size_t min_pos = bytes.size() > 65557 ? bytes.size() - 65557 : 0;
  size_t eocd = std::string::npos;
  if (bytes.size() >= 22) {
    for (size_t pos = bytes.size() - 22;; --pos) {
      if (ReadLE(bytes, pos, 4, path) == 0x06054b50) {
        eocd = pos;
        break;
      }
      if (pos == min_pos) break;
    }
  }
  if (eocd == std::string::npos) Fail(path, ": not a zip/npz archive");
  uint64_t entries = ReadLE(bytes, eocd + 10, 2, path);
  uint64_t cd_offset = ReadLE(bytes, eocd + 16, 4, path);
  if ((entries == 0xFFFF || cd_offset == 0xFFFFFFFF) && eocd >= 20 &&
      ReadLE(bytes, eocd - 20, 4, path) == 0x07064b50) {  // zip64 locator
    const uint64_t zip64_eocd = ReadLE(bytes, eocd - 20 + 8, 8, path);
    if (ReadLE(bytes, zip64_eocd, 4, path) != 0x06064b50) Fail(path, ": bad zip64 record");
    entries = ReadLE(bytes, zip64_eocd + 32, 8, path);
    cd_offset = ReadLE(bytes, zip64_eocd + 48, 8, path);
  }

  std::vector<std::pair<std::string, std::string>> result;
  size_t pos = cd_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (ReadLE(bytes, pos, 4, path) != 0x02014b50) Fail(path, ": bad zip central directory");
    const uint64_t flags = ReadLE(bytes, pos + 8, 2, path);
    const uint64_t method = ReadLE(bytes, pos + 10, 2, path);
    const uint64_t crc = ReadLE(bytes, pos + 16, 4, path);
    uint64_t size = ReadLE(bytes, pos + 20, 4, path);  // compressed == uncompressed if stored
    const uint64_t name_len = ReadLE(bytes, pos + 28, 2, path);
    const uint64_t extra_len = ReadLE(bytes, pos + 30, 2, path);
    const uint64_t comment_len = ReadLE(bytes, pos + 32, 2, path);
    uint64_t local = ReadLE(bytes, pos + 42, 4, path);
    if (pos + 46 + name_len > bytes.size()) Fail(path, ": truncated zip central directory");
    const std::string name = bytes.substr(pos + 46, name_len);
    const std::string where = path + " entry '" + name + "'";
    // Zip64 extra field: the 64-bit values of the fields that read 0xFFFFFFFF.
    for (size_t x = pos + 46 + name_len; x + 4 <= pos + 46 + name_len + extra_len;) {
      const uint64_t id = ReadLE(bytes, x, 2, path), len = ReadLE(bytes, x + 2, 2, path);
      if (id == 0x0001) {
        size_t field = x + 4;
        if (ReadLE(bytes, pos + 24, 4, path) == 0xFFFFFFFF) field += 8;  // uncompressed
        if (size == 0xFFFFFFFF) size = ReadLE(bytes, field, 8, path), field += 8;
        if (local == 0xFFFFFFFF) local = ReadLE(bytes, field, 8, path);
      }
      x += 4 + len;
    }
    if (flags & 1) Fail(where, " is encrypted, which octet cannot read");
    if (method != 0)
      Fail(where, " is compressed (zip method ", method,
           "); octet reads only uncompressed .npz files: save with np.savez, not "
           "np.savez_compressed");
    if (ReadLE(bytes, local, 4, path) != 0x04034b50) Fail(where, ": bad zip local header");
    const uint64_t data_start =
        local + 30 + ReadLE(bytes, local + 26, 2, path) + ReadLE(bytes, local + 28, 2, path);
    if (data_start + size > bytes.size()) Fail(where, ": data is truncated");
    std::string data = bytes.substr(data_start, size);
    if (Crc32(data) != crc) Fail(where, ": CRC mismatch, the archive is corrupted");
    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    result.emplace_back(key, std::move(data));
    pos += 46 + name_len + extra_len + comment_len;
  }
  return result;
}

std::string WriteNpz(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, directory;
  for (const auto& [key, data] : entries) {
    const std::string name = key + ".npy";
    OCTET_CHECK(data.size() < 0xFFFFFFFFu && out.size() < 0xFFFFFFFFu, "output '", key,
                "' is too large for an .npz without zip64; write .npy instead");
    const uint32_t crc = Crc32(data);
    const size_t local = out.size();
    auto common = [&](std::string& rec) {  // version, flags, method, time, date, crc, sizes
      AppendLE(rec, 20, 2);
      AppendLE(rec, 0, 2);
      AppendLE(rec, 0, 2);
      AppendLE(rec, 0, 2);
      AppendLE(rec, 0x21, 2);  // 1980-01-01: fixed, so output files are reproducible
      AppendLE(rec, crc, 4);
      AppendLE(rec, data.size(), 4);
      AppendLE(rec, data.size(), 4);
      AppendLE(rec, name.size(), 2);
      AppendLE(rec, 0, 2);
    };
    AppendLE(out, 0x04034b50, 4);
    common(out);
    out += name;
    out += data;
    AppendLE(directory, 0x02014b50, 4);
    AppendLE(directory, 20, 2);  // version made by
    common(directory);
    AppendLE(directory, 0, 2);  // comment length
    AppendLE(directory, 0, 2);  // disk number
    AppendLE(directory, 0, 2);  // internal attributes
    AppendLE(directory, 0, 4);  // external attributes
    AppendLE(directory, local, 4);
    directory += name;
  }
  const size_t cd_offset = out.size();
  out += directory;
  AppendLE(out, 0x06054b50, 4);
  AppendLE(out, 0, 2);
  AppendLE(out, 0, 2);
  AppendLE(out, entries.size(), 2);
  AppendLE(out, entries.size(), 2);
  AppendLE(out, directory.size(), 4);
  AppendLE(out, cd_offset, 4);
  AppendLE(out, 0, 2);
  return out;
}

}  // namespace octet
