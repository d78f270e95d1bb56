#include "rewrite/rewrite.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <vector>

#include "rewrite/constant_fold.h"
#include "rewrite/float_attention.h"
#include "rewrite/float_gelu.h"
#include "rewrite/float_matmul_int8.h"
#include "rewrite/float_rms_norm.h"
#include "rewrite/float_rotary.h"
#include "rewrite/float_silu.h"
#include "rewrite/int8_attention.h"
#include "rewrite/integer_matmul_float.h"
#include "rewrite/qdq_activation.h"
#include "rewrite/qdq_binary.h"
#include "rewrite/qdq_conv.h"
#include "rewrite/qdq_lookup.h"
#include "rewrite/qdq_matmul.h"
#include "rewrite/qdq_movement.h"
#include "rewrite/qdq_nbits.h"
#include "rewrite/sibling_products.h"
#include "rewrite/slice_merge.h"

namespace octet {

namespace {

bool EnvIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

bool IsSorted(const Graph& g) {
  std::vector<bool> done(g.values.size(), false);
  for (int v : g.inputs) done[v] = true;
  for (const auto& [v, t] : g.initializers) done[v] = true;
  for (const Node& n : g.nodes) {
    for (int in : n.inputs)
      if (in >= 0 && !done[in] && g.values[in].producer >= 0) return false;
    for (int out : n.outputs)
      if (out >= 0) done[out] = true;
  }
  return true;
}

QdqReport RunQdqPasses(Graph& graph, const NodeEvaluator& evaluate) {
  // ORT's S8-to-U8 choice is made on the graph as written, before any pass edits it.
  const std::vector<bool> ort_uint8_values = FindOrtUint8Values(graph);
  QdqReport report = FuseQdqMatMul(graph);
  FuseBlockedDqMatMul(graph, report);
  FuseQdqConv(graph, report);
  AbsorbQdqActivations(graph, report);
  ElideQdqAroundMovement(graph, report);
  FuseQdqBinary(graph, report, ort_uint8_values);
  FoldMatMulIntegerToFloat(graph, report);
  FuseFloatGelu(graph, report);
  FuseFloatRmsNorm(graph, report);
  FuseFloatRotary(graph, report);
  FuseFloatGatedSilu(graph, report);
  FuseFloatAttention(graph, report);
  FuseKvAppend(graph, report);
  MergeSliceChains(graph, report);
  // OCTET_QDQ_LOOKUP=0: the control for the lookup tables alone (every other pass runs).
  if (!EnvIs("OCTET_QDQ_LOOKUP", "0")) FoldPointwiseChainsToTables(graph, report, evaluate);
  FuseMaskedSoftmax(graph, report);       // after the tables: it takes one in
  FoldInt8HeadTransposes(graph, report);  // after the movement pass settles the Transposes
  return report;
}

}  // namespace

void ApplyRewrites(Graph& graph, const NodeEvaluator& evaluate) {
  const QdqReport report = ApplyRewrites(graph, evaluate, RewriteOptions{});
  if (!EnvIs("OCTET_QDQ", "0") && EnvIs("OCTET_QDQ_DEBUG", "1"))
    std::cerr << FormatQdqReport(report) << std::flush;
}

QdqReport ApplyRewrites(Graph& graph, const NodeEvaluator& evaluate,
                        const RewriteOptions& options) {
  // OCTET_QDQ=0 is the control: the graph runs node by node, as written.
  QdqReport report;
  const bool passes = options.enabled && !EnvIs("OCTET_QDQ", "0");
  if (passes) report = RunQdqPasses(graph, evaluate);
  // After the QDQ passes: a MatMul they folded is no longer a float MatMul.
  if (options.float_matmul_int8) QuantizeFloatMatMuls(graph, report);
  if (options.merge_siblings && passes && !EnvIs("OCTET_QDQ_SIBLINGS", "0"))
    MergeSiblingProducts(graph, report);
  // A pass puts its node where the group's first node was; an input of the group that
  // the graph computes later (ORT orders a subgraph it hands over by its own rules) would
  // then come after it. Sessions run nodes in order: restore one that is valid.
  if (!IsSorted(graph)) graph.TopologicalSort();
  if (options.fold_constants && passes) FoldConstantNodes(graph, evaluate);
  return report;
}

std::string DescribeRewrites(const Graph& graph, const NodeEvaluator& evaluate) {
  if (EnvIs("OCTET_QDQ", "0")) return "qdq passes off (OCTET_QDQ=0)\n";
  Graph copy = graph;  // initializers are shared tensors; values keep pointing at graph's
  // A session's passes, but constant folding (it runs kernels; it adds no line).
  RewriteOptions session;
  session.merge_siblings = true;
  const QdqReport report = ApplyRewrites(copy, evaluate, session);
  std::ostringstream os;
  for (const QdqRecord& r : report.records) {
    os << (r.fused ? "fused   " : "refused ") << r.op << " '" << r.node << "'"
       << (r.fused ? " -> " : " why=") << r.detail << "\n";
  }
  os << "qdq_groups=" << report.groups << " claimed=" << report.claimed << "\n";
  return os.str();
}

}  // namespace octet
