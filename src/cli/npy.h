// The NumPy file formats the CLI reads and writes: .npy (format 1.0-3.0,
// little-endian, C or Fortran order) and .npz (a stored, uncompressed zip of
// .npy entries, what np.savez writes).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace octet {

// The .npy bytes as a tensor of dtype `expected` (bfloat16 / float8 / 4-bit
// types from ml_dtypes arrays); `where` names the file in errors.
Tensor ReadNpy(const std::string& bytes, DType expected, const std::string& where);

// t as .npy bytes (types numpy lacks as their raw bits; int4 / uint4 as int8 / uint8).
std::string SerializeNpy(const Tensor& t);

// The entries (name without ".npy", .npy bytes) of an .npz archive.
std::vector<std::pair<std::string, std::string>> ReadNpz(const std::string& bytes,
                                                         const std::string& where);
// An .npz archive of (name, .npy bytes) entries.
std::string WriteNpz(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace octet
