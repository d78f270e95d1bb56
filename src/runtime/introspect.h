// What the front ends (the CLI, the Python module, the ONNX Runtime plugin) ask
// of octet besides running a model (runtime/session.h): which kernels it has,
// what its rewrites do with a model, and which instruction-set paths run here.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/session.h"

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

// What octet takes of a graph that another runtime schedules (the ONNX Runtime
// plugin's GetCapability, docs/ort-ep.md).
struct ClaimOptions {
  SessionOptions session;  // rewrites and float_matmul are read; threads is not
  // true: a piece also takes the nodes octet runs in float between and around its
  // int8 nodes (a model octet runs whole becomes one piece). false: only int8
  // nodes, QuantizeLinear / DequantizeLinear and data movement.
  bool regions = true;
  // Per node of the graph (empty: none): never claim it (the caller cannot hand it
  // over, e.g. a 4-bit value ORT holds packed).
  std::vector<bool> excluded;
};

struct ClaimPlan {
  // Node indices of the graph given, one list per piece, in graph order. Each
  // piece is connected, no path between two of its nodes leaves it, and it holds
  // at least one int8 product or int8 group.
  std::vector<std::vector<int>> pieces;
  int claimed_nodes = 0;  // nodes in all pieces
  int int8_nodes = 0;     // int8 nodes octet makes of the pieces (fused groups, integer ops)
  // Per node of the graph given: why it is not claimed ("" when it is):
  // "no_kernel: <octet's message>", "float_only" (no int8 work next to it),
  // "not_int8" (regions=false), "excluded" (ClaimOptions::excluded), "not_run"
  // (nothing octet keeps after its rewrites reads it).
  std::vector<std::string> unclaimed_why;
  std::string report;  // the rewrites' report on the whole graph (FormatQdqReport)
};

// Runs the rewrites and creates every kernel on a copy of `graph` (which must be
// topologically sorted), maps what they became back onto the graph's nodes, and
// cuts the claimable nodes into pieces.
ClaimPlan PlanClaims(const Graph& graph, const ClaimOptions& options);

// The instruction-set path the kernels use (OCTET_ISA or the best one), and
// every path this build and CPU can run, by their OCTET_ISA names.
std::string ActiveIsaName();
std::vector<std::string> SupportedIsaNames();

}  // namespace octet
