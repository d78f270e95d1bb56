// Reads an ONNX model (protobuf) into a Graph. Every failure is an
// octet::Error naming what is wrong: truncated or malformed protobuf,
// unsupported IR version, missing or escaping external data, bad tensor data.
#pragma once

#include <string>

#include "graph/graph.h"

namespace octet {

struct Model {
  Graph graph;
  int64_t ir_version = 0;
  std::string producer_name;
};

// External data files are resolved relative to the model file's folder.
Model LoadModelFromFile(const std::string& path);
// base_dir resolves external data; empty means external data is refused.
Model LoadModelFromBytes(const void* data, size_t size, const std::string& base_dir);

}  // namespace octet
