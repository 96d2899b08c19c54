// Pictures of an autograd graph: what backward() will walk from a root, as Graphviz DOT or as a
// self-contained SVG. For debugging ("why does this parameter get no gradient?", "what did this op
// record?") and for learning what a forward pass leaves behind.
//
// One box per node reachable from the root: the op's name (its Node::name(), e.g. "matmul"), and for a
// leaf's AccumulateGrad the leaf's name (when given) and shape. An arrow goes from each node to the node
// its gradient flows into (the direction backward() runs), labelled with the shape and dtype of that input
// where the node recorded it. A node whose saved tensors were already released (by a backward without
// retain_graph) is drawn dashed: backward through it again would fail.
//
// \code
//   Tensor loss = mean(relu(matmul(x, w)) * 2.0);
//   std::string svg = autograd::graph_to_svg(loss, {{"w", w}});   // write it to a file, open in a browser
//   std::string dot = autograd::graph_to_dot(loss, {{"w", w}});   // or: dot -Tpng graph.dot > graph.png
// \endcode
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "tensor/tensor.h"

namespace brigade::autograd {

/// Names for leaves, e.g. a module's named_parameters(): a leaf found in the graph is labelled with its name.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// One node of the graph as drawn: its label lines and the nodes its gradient flows into.
struct GraphNode {
  const Node* node = nullptr;
  std::string op;         ///< Node::name(), or "output" for the root tensor's own box
  std::string detail;     ///< leaf name and shape for AccumulateGrad; the root's shape; else empty
  bool released = false;  ///< saved tensors already freed
  int depth = 0;          ///< longest path from the root: the root is 0, every edge goes one deeper or more
  struct Edge {
    int to = -1;        ///< index into GraphLayout::nodes
    std::string label;  ///< "[8, 4] float32" where the node recorded the input's shape, else empty
  };
  std::vector<Edge> edges;
};

/// The nodes reachable from `root` in the order a breadth-first walk meets them (root first), each with its
/// depth. Throws AutogradError when `root` has no graph (it does not require grad).
std::vector<GraphNode> collect_graph(const Tensor& root, const NamedTensors& names = {});

/// Graphviz DOT text of the graph (rankdir top to bottom, root at the top).
std::string graph_to_dot(const Tensor& root, const NamedTensors& names = {});

/// A self-contained SVG of the graph: nodes in rows by depth, arrows downwards, no external tools needed.
std::string graph_to_svg(const Tensor& root, const NamedTensors& names = {});

}  // namespace brigade::autograd
