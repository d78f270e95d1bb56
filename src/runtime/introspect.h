// What the front ends (the CLI, the Python module, the ONNX Runtime plugin) ask
// of octet besides running a model (runtime/session.h): which kernels it has,
// what its rewrites do with a model, and which instruction-set paths run here.
#pragma once

#include <string>
#include <vector>

namespace octet {

struct KernelInfo {
  std::string domain;  // "ai.onnx", "com.microsoft" or "octet" (made by the rewrites)
  std::string op_type;
  int since_version = 1;
  int end_version = 1 << 30;  // inclusive; 1 << 30 means no upper bound
};

// Every registered kernel, in registration order.
std::vector<KernelInfo> RegisteredKernels();

// What the graph rewrites do with the model at `path` (rewrite/rewrite.h
// DescribeRewrites): one line per fused or refused group, then a summary.
std::string DescribeModelRewrites(const std::string& path);

// The instruction-set path the kernels use (OCTET_ISA or the best one), and
// every path this build and CPU can run, by their OCTET_ISA names.
std::string ActiveIsaName();
std::vector<std::string> SupportedIsaNames();

}  // namespace octet
