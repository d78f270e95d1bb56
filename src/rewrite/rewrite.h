// Graph passes that run once at session creation, before kernels are chosen.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Computes one node's outputs from its inputs (null: omitted) as the session's
// kernels would. Passes that prove a rewrite by evaluating nodes (the lookup
// tables) are given one; the runtime passes ops/evaluate.h's EvaluateNode.
using NodeEvaluator =
    std::function<std::vector<Tensor>(const Node&, const std::vector<const Tensor*>&)>;

// Runs every enabled pass over the graph (in place). Passes keep the graph's
// inputs, outputs and results unchanged; they only change how it is computed.
// OCTET_QDQ=0 turns them off; OCTET_QDQ_DEBUG=1 prints the report to stderr.
void ApplyRewrites(Graph& graph, const NodeEvaluator& evaluate);

// What a session asks of the passes (runtime/session.h SessionOptions).
struct RewriteOptions {
  bool enabled = true;  // false: no pass runs (OCTET_QDQ=0 also turns them off)
  // The forward route (rewrite/float_matmul_int8.h): float MatMuls with a constant
  // 2-D weight become octet.Int8DynamicMatMul. Runs even when `enabled` is false.
  bool float_matmul_int8 = false;
  // Nodes of constant inputs run once and become initializers (rewrite/constant_fold.h);
  // a session sets it unless it keeps every intermediate value. Needs `enabled`.
  bool fold_constants = false;
  // 4-bit and int8 products of one input run as one (rewrite/sibling_products.h), after
  // the forward route has set their arithmetic; a session sets it (the ORT plugin's claim
  // analysis sees one node per product). Needs `enabled`; OCTET_QDQ_SIBLINGS=0 is its
  // control.
  bool merge_siblings = false;
};

// ApplyRewrites with explicit options; returns what the passes did instead of
// printing it (an empty report when they are off).
QdqReport ApplyRewrites(Graph& graph, const NodeEvaluator& evaluate, const RewriteOptions& options);

// For `octet inspect MODEL`: what a session's passes would do to this graph (run on a
// copy; the products of one input merged, constant folding left out), one line per
// fused or refused group in the order the passes met them:
//   fused   <op> '<node>' -> <what it became>
//   refused <op> '<node>' why=<reason>
// then `qdq_groups=<n> claimed=<n>`; says so when OCTET_QDQ=0 turns the passes off.
std::string DescribeRewrites(const Graph& graph, const NodeEvaluator& evaluate);

}  // namespace octet
