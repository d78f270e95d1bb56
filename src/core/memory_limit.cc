#include "core/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace octet {

namespace {

// 0: no TensorByteLimit on this thread.
thread_local uint64_t tls_max_bytes = 0;

// The number in a cgroup memory file ("max" or an unreadable file: no limit).
uint64_t ReadCgroupLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.size() > 19) return 0;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return 0;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

// The lowest memory limit of this process's cgroup and its parents (cgroup v2), or the
// v1 memory controller's limit; 0 when there is none.
uint64_t CgroupMemoryLimit() {
  uint64_t limit = 0;
  auto take = [&](uint64_t v) {
    if (v != 0) limit = limit == 0 ? v : std::min(limit, v);
  };
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) != 0) continue;  // the v2 hierarchy's line
    std::string group = line.substr(3);
    for (;;) {
      take(ReadCgroupLimit("/sys/fs/cgroup" + group + "/memory.max"));
      if (group.empty() || group == "/") break;
      group = group.substr(0, group.rfind('/'));
    }
  }
  take(ReadCgroupLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  return limit;
}

uint64_t UsableMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t memory = pages > 0 && page > 0
                        ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                        : uint64_t{4} << 30;
  const uint64_t cgroup = CgroupMemoryLimit();
  if (cgroup != 0) memory = std::min(memory, cgroup);
  return memory;
}

}  // namespace

uint64_t ParseByteSize(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (suffix == "T" || suffix == "t") shift = 40;
  OCTET_CHECK(digits > 0 && digits <= 19 && shift >= 0, what, " is '", text,
              "', not a byte count (a number, optionally with K, M, G or T)");
  const uint64_t value = std::stoull(text.substr(0, digits));
  OCTET_CHECK(value > 0, what, " must be at least 1 byte, got '", text, "'");
  OCTET_CHECK(value <= std::numeric_limits<uint64_t>::max() >> shift, what, " is '", text,
              "', more than 2^64 bytes");
  return value << shift;
}

uint64_t DefaultMaxTensorBytes() {
  if (const char* env = std::getenv("OCTET_MAX_TENSOR_BYTES"))
    return ParseByteSize(env, "OCTET_MAX_TENSOR_BYTES");
  return UsableMemory() / 4;
}

uint64_t MaxTensorBytes() {
  if (tls_max_bytes != 0) return tls_max_bytes;
  static const uint64_t process_default = DefaultMaxTensorBytes();
  return process_default;
}

TensorByteLimit::TensorByteLimit(uint64_t max_bytes) : previous_(tls_max_bytes) {
  tls_max_bytes = max_bytes;
}

TensorByteLimit::~TensorByteLimit() { tls_max_bytes = previous_; }

std::string ByteCountToString(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  int unit = 0;
  while (unit < 5 && bytes >> (10 * (unit + 2)) != 0) ++unit;
  const int shift = 10 * (unit + 1);
  if (bytes % (uint64_t{1} << shift) == 0)
    return std::to_string(bytes >> shift) + " " + kUnits[unit];
  char approx[32];
  std::snprintf(approx, sizeof approx, "%.1f",
                static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << shift));
  return std::to_string(bytes) + " bytes (" + approx + " " + kUnits[unit] + ")";
}

}  // namespace octet
