// Graph pictures: which nodes collect_graph finds from a root, at which depth, with which edge labels, and
// that the DOT and SVG texts draw exactly those (one box per node, one arrow per edge).
#include "autograd/graph_dump.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "test_support.h"

namespace brigade {
namespace {

using autograd::collect_graph;
using autograd::GraphNode;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

std::vector<std::string> ops_of(const std::vector<GraphNode>& nodes) {
  std::vector<std::string> ops;
  for (const auto& g : nodes) ops.push_back(g.op);
  return ops;
}

// The README's example: loss = mean(relu(x @ w) * 2); x needs no gradient, so only w's sink is drawn.
struct ReadmeExample {
  Tensor x = randn({8, 4});
  Tensor w = randn({4, 3}, TensorOptions().requires_grad());
  Tensor loss = mean(relu(matmul(x, w)) * 2.0);
};

TEST(GraphDump, TheReadmeExampleIsAChainFromTheLossToTheWeight) {
  ReadmeExample example;
  const auto nodes = collect_graph(example.loss, {{"w", example.w}});
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_EQ(ops_of(nodes),
            (std::vector<std::string>{"output", "mean", "mul", "relu", "matmul", "AccumulateGrad"}));
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].depth, static_cast<int>(i)) << nodes[i].op;
    EXPECT_EQ(nodes[i].edges.size(), i + 1 < nodes.size() ? 1u : 0u) << nodes[i].op;
  }
  EXPECT_EQ(nodes[0].detail, "[] float32");
  EXPECT_EQ(nodes[5].detail, "w [4, 3] float32");
  EXPECT_EQ(nodes[4].edges[0].label, "[4, 3] float32");  // matmul's second input; the first needs no gradient
  EXPECT_EQ(nodes[3].edges[0].label, "[8, 3] float32");  // relu's input
}

TEST(GraphDump, ASharedInputGetsOneBoxAtItsLongestDistanceFromTheRoot) {
  Tensor a = randn({3}, TensorOptions().requires_grad());
  Tensor y = sum(a * exp(a) + a);  // a feeds mul, exp and add
  const auto nodes = collect_graph(y);
  size_t sinks = 0;
  int sink_depth = -1, exp_depth = -1;
  for (const auto& g : nodes) {
    if (g.op == "AccumulateGrad") ++sinks, sink_depth = g.depth;
    if (g.op == "exp") exp_depth = g.depth;
  }
  EXPECT_EQ(sinks, 1u);
  EXPECT_EQ(sink_depth, exp_depth + 1);  // the longest path is sum -> add -> mul -> exp -> a
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& e : nodes[i].edges) EXPECT_GT(nodes[static_cast<size_t>(e.to)].depth, nodes[i].depth);
  }
}

TEST(GraphDump, NodesReleasedByABackwardAreMarked) {
  ReadmeExample example;
  EXPECT_FALSE(collect_graph(example.loss)[2].released);
  example.loss.backward();
  const auto nodes = collect_graph(example.loss);
  EXPECT_TRUE(nodes[2].released);   // mul's saved tensors are gone
  EXPECT_FALSE(nodes[5].released);  // a sink saves nothing
  EXPECT_EQ(count_of(autograd::graph_to_dot(example.loss), "style=dashed"), 4u);  // mean, mul, relu, matmul
}

TEST(GraphDump, DotHasOneStatementPerNodeAndPerEdge) {
  ReadmeExample example;
  const std::string dot = autograd::graph_to_dot(example.loss, {{"w", example.w}});
  EXPECT_EQ(dot.rfind("digraph autograd {", 0), 0u);
  EXPECT_EQ(count_of(dot, " -> "), 5u);
  EXPECT_EQ(count_of(dot, "[label="), 6u + 4u);  // six boxes; the four arrows out of ops (not the root's)
  EXPECT_NE(dot.find("n4 -> n5 [label=\"[4, 3] float32\"]"), std::string::npos);
  EXPECT_NE(dot.find("label=\"AccumulateGrad\\nw [4, 3] float32\""), std::string::npos);
}

TEST(GraphDump, SvgDrawsEveryNodeAndEdgeAndEscapesText) {
  ReadmeExample example;
  const std::string svg = autograd::graph_to_svg(example.loss, {{"w<&>", example.w}});
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(count_of(svg, "<rect x="), 6u);
  EXPECT_EQ(count_of(svg, "<line "), 5u);
  EXPECT_NE(svg.find("w&lt;&amp;&gt; [4, 3] float32"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("w<&>"), std::string::npos);
}

TEST(GraphDump, ATensorWithoutAGraphIsATypedError) {
  const std::string message = testing::message_of<AutogradError>([] { collect_graph(randn({2})); });
  EXPECT_NE(message.find("expected a tensor that requires grad"), std::string::npos) << message;
}

}  // namespace
}  // namespace brigade
