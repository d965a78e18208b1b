//! The build graph: environment snapshot → trials → cell summaries → the matrix. Execution
//! walks it in dependency order; identical keys collapse into one trial node, so two cells
//! that resolve to the same env run each trial once.

use crate::db::PlannedTrial;
use crate::key::TrialKey;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    EnvSnapshot(String),
    Trial(TrialKey),
    Cell(usize),
    Matrix,
}

#[derive(Debug, Clone)]
pub struct Dag {
    pub graph: DiGraph<Node, ()>,
    pub trial_nodes: HashMap<TrialKey, NodeIndex>,
    pub cell_nodes: Vec<NodeIndex>,
    pub matrix: NodeIndex,
}

impl PartialEq for Dag {
    fn eq(&self, other: &Self) -> bool {
        self.graph.node_weights().eq(other.graph.node_weights())
            && self.graph.raw_edges().iter().map(|e| (e.source(), e.target())).eq(other.graph.raw_edges().iter().map(|e| (e.source(), e.target())))
    }
}

impl Eq for Dag {}

impl Dag {
    pub fn build(cells: usize, trials: &[PlannedTrial], env_snapshot: &str) -> Dag {
        let mut graph = DiGraph::new();
        let env = graph.add_node(Node::EnvSnapshot(env_snapshot.to_string()));
        let cell_nodes: Vec<NodeIndex> = (0..cells).map(|c| graph.add_node(Node::Cell(c))).collect();
        let matrix = graph.add_node(Node::Matrix);
        let mut trial_nodes = HashMap::new();
        for t in trials {
            let node = *trial_nodes.entry(t.key.clone()).or_insert_with(|| {
                let n = graph.add_node(Node::Trial(t.key.clone()));
                graph.add_edge(env, n, ());
                n
            });
            graph.update_edge(node, cell_nodes[t.cell], ());
        }
        for c in &cell_nodes {
            graph.add_edge(*c, matrix, ());
        }
        Dag { graph, trial_nodes, cell_nodes, matrix }
    }

    /// Trial keys in an order that respects every dependency (all trials depend only on the
    /// environment snapshot, so this is a stable topological order).
    pub fn trial_order(&self) -> Vec<TrialKey> {
        match petgraph::algo::toposort(&self.graph, None) {
            Ok(order) => order
                .into_iter()
                .filter_map(|n| match &self.graph[n] {
                    Node::Trial(k) => Some(k.clone()),
                    _ => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    pub fn unique_trials(&self) -> usize {
        self.trial_nodes.len()
    }
}
