#include "autograd/graph_dump.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include "autograd/engine.h"
#include "tensor/error.h"

namespace brigade::autograd {
namespace {

std::string shape_and_dtype(const Shape& shape, DType dtype) {
  return shape_str(shape) + " " + dtype_name(dtype);
}

// The label of a leaf's box: its name when `names` has it, then its shape.
std::string leaf_detail(const AccumulateGrad& sink, const NamedTensors& names) {
  const Tensor& leaf = sink.leaf();
  std::string name;
  for (const auto& [n, t] : names) {
    if (t.defined() && t.unsafe_impl_id() == leaf.unsafe_impl_id()) name = n + " ";
  }
  return name + shape_and_dtype(leaf.shape(), leaf.dtype());
}

}  // namespace

std::vector<GraphNode> collect_graph(const Tensor& root, const NamedTensors& names) {
  BRIGADE_CHECK_AS(AutogradError, root.defined() && root.requires_grad(),
                   "collect_graph: expected a tensor that requires grad (the root of a graph), found ",
                   root.defined() ? "one that does not require grad" : "an undefined tensor");
  const Edge start = gradient_edge(root);
  std::vector<GraphNode> nodes(1);
  nodes[0].op = "output";
  nodes[0].detail = shape_and_dtype(root.shape(), root.dtype());

  // Index the nodes breadth-first from the root, so that the numbering reads top to bottom.
  std::unordered_map<const Node*, int> index;
  std::vector<const Node*> queue{start.node.get()};
  index[start.node.get()] = 1;
  for (size_t head = 0; head < queue.size(); ++head) {
    for (const Edge& e : queue[head]->next_edges) {
      if (e.node && index.emplace(e.node.get(), static_cast<int>(queue.size()) + 1).second) {
        queue.push_back(e.node.get());
      }
    }
  }
  nodes.resize(queue.size() + 1);
  nodes[0].edges.push_back({1, ""});
  for (const Node* node : queue) {
    GraphNode& g = nodes[static_cast<size_t>(index.at(node))];
    g.node = node;
    g.op = node->name();
    g.released = node->released();
    if (const auto* sink = dynamic_cast<const AccumulateGrad*>(node)) g.detail = leaf_detail(*sink, names);
    const auto* function = dynamic_cast<const FunctionNode*>(node);
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.node) continue;  // an input that needs no gradient: nothing flows there
      std::string label;
      if (function != nullptr && i < function->recorded_inputs().size()) {
        const auto& input = function->recorded_inputs()[i];
        label = shape_and_dtype(input.shape, input.dtype);
      }
      g.edges.push_back({index.at(e.node.get()), label});
    }
  }
  // Depth = the longest path from the root, so that every arrow points down the picture.
  nodes[1].depth = 1;
  for (const auto& node : topological_order({start.node})) {  // engine.h: parents before children
    const GraphNode& g = nodes[static_cast<size_t>(index.at(node.get()))];
    for (const auto& e : g.edges) {
      GraphNode& child = nodes[static_cast<size_t>(e.to)];
      child.depth = std::max(child.depth, g.depth + 1);
    }
  }
  return nodes;
}

std::string graph_to_dot(const Tensor& root, const NamedTensors& names) {
  const std::vector<GraphNode> nodes = collect_graph(root, names);
  std::ostringstream out;
  out << "digraph autograd {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
      << "  edge [fontname=\"monospace\", fontsize=8];\n";
  auto quoted = [](const std::string& s) {
    std::string q;
    for (char c : s) {
      if (c == '\n')
        q += "\\n";  // DOT's line break inside a label
      else
        q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    }
    return "\"" + q + "\"";
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& g = nodes[i];
    std::string label = g.op + (g.detail.empty() ? "" : "\n" + g.detail);
    out << "  n" << i << " [label=" << quoted(label);
    if (i == 0) out << ", style=filled, fillcolor=\"#fff3c4\"";
    if (g.op == "AccumulateGrad") out << ", style=filled, fillcolor=\"#dbeafe\"";
    if (g.released) out << ", style=dashed";
    out << "];\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& e : nodes[i].edges) {
      out << "  n" << i << " -> n" << e.to;
      if (!e.label.empty()) out << " [label=" << quoted(e.label) << "]";
      out << ";\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace brigade::autograd
