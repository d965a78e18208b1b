//! The build graph the engine walks: environment snapshot → trials → cell aggregates →
//! artifacts. Identical keys collapse into one trial node, so two cells that resolve to the
//! same env run each trial once; the scheduler executes trial nodes under its slots, folds a
//! cell when its trials are done, and renders an artifact when its cells are.

use crate::plan_keys::PlannedTrial;
use aorta_store::Key;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use std::collections::HashMap;

/// A file of the run directory rendered from the recipe and the cells' results. Its key
/// (computed when its inputs are done) hashes its inputs' keys and its renderer's version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Artifact {
    MatrixJson,
    MatrixMd,
    /// report.html: the matrix with intervals, plots, detectors, the environment summary and
    /// how to reproduce; depends on the cells and the environment record.
    ReportHtml,
    ResolvedRecipe,
    /// `environments/<name>/env.json`: the snapshot the keys used.
    EnvJson(String),
}

impl Artifact {
    /// Whether it shows the node's doctor verdict (so the verdict is among its key's inputs).
    pub fn shows_doctor(&self) -> bool {
        matches!(
            self,
            Artifact::EnvJson(_) | Artifact::MatrixMd | Artifact::ReportHtml
        )
    }

    /// Path relative to the run directory.
    pub fn path(&self) -> String {
        match self {
            Artifact::MatrixJson => "matrix.json".into(),
            Artifact::MatrixMd => "matrix.md".into(),
            Artifact::ReportHtml => "report.html".into(),
            Artifact::ResolvedRecipe => "recipe.resolved.yaml".into(),
            Artifact::EnvJson(slug) => format!("environments/{slug}/env.json"),
        }
    }

    /// Parses a run-directory path back (`aorta explain --artifact`).
    pub fn from_path(path: &str) -> Option<Artifact> {
        match path {
            "matrix.json" => Some(Artifact::MatrixJson),
            "matrix.md" => Some(Artifact::MatrixMd),
            "report.html" => Some(Artifact::ReportHtml),
            "recipe.resolved.yaml" => Some(Artifact::ResolvedRecipe),
            _ => path
                .strip_prefix("environments/")?
                .strip_suffix("/env.json")
                .filter(|s| !s.is_empty() && !s.contains('/'))
                .map(|s| Artifact::EnvJson(s.to_string())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    EnvSnapshot(String),
    Trial(Key),
    Cell(usize),
    Artifact(Artifact),
}

/// An edge from a trial node to a cell: the position of that planned trial in the plan.
pub type PlanIndex = usize;

#[derive(Debug, Clone)]
pub struct Dag {
    pub graph: DiGraph<Node, Option<PlanIndex>>,
    pub env: NodeIndex,
    pub trial_nodes: HashMap<Key, NodeIndex>,
    pub cell_nodes: Vec<NodeIndex>,
    pub artifact_nodes: Vec<NodeIndex>,
}

impl PartialEq for Dag {
    fn eq(&self, other: &Self) -> bool {
        self.graph.node_weights().eq(other.graph.node_weights())
            && self
                .graph
                .raw_edges()
                .iter()
                .map(|e| (e.source(), e.target(), e.weight))
                .eq(other
                    .graph
                    .raw_edges()
                    .iter()
                    .map(|e| (e.source(), e.target(), e.weight)))
    }
}

impl Eq for Dag {}

impl Dag {
    /// `environments`: the slugs of the environments the cells use (one env.json each).
    pub fn build(
        cells: usize,
        trials: &[PlannedTrial],
        env_snapshot: &str,
        environments: &[String],
    ) -> Dag {
        let mut graph = DiGraph::new();
        let env = graph.add_node(Node::EnvSnapshot(env_snapshot.to_string()));
        let cell_nodes: Vec<NodeIndex> =
            (0..cells).map(|c| graph.add_node(Node::Cell(c))).collect();
        let mut trial_nodes = HashMap::new();
        for (i, t) in trials.iter().enumerate() {
            let node = *trial_nodes.entry(t.key.clone()).or_insert_with(|| {
                let n = graph.add_node(Node::Trial(t.key.clone()));
                graph.add_edge(env, n, None);
                n
            });
            graph.add_edge(node, cell_nodes[t.cell], Some(i));
        }
        let mut artifact_nodes = Vec::new();
        for a in [
            Artifact::MatrixJson,
            Artifact::MatrixMd,
            Artifact::ReportHtml,
        ] {
            let n = graph.add_node(Node::Artifact(a.clone()));
            for c in &cell_nodes {
                graph.add_edge(*c, n, None);
            }
            if a == Artifact::ReportHtml {
                graph.add_edge(env, n, None);
            }
            artifact_nodes.push(n);
        }
        // The resolved recipe depends on the recipe alone: a root of its own.
        artifact_nodes.push(graph.add_node(Node::Artifact(Artifact::ResolvedRecipe)));
        for e in environments {
            let n = graph.add_node(Node::Artifact(Artifact::EnvJson(e.clone())));
            graph.add_edge(env, n, None);
            artifact_nodes.push(n);
        }
        Dag {
            graph,
            env,
            trial_nodes,
            cell_nodes,
            artifact_nodes,
        }
    }

    /// A cell's planned trials (positions in the plan), in trial-index order.
    pub fn cell_trials(&self, cell: usize) -> Vec<PlanIndex> {
        let mut v: Vec<PlanIndex> = self
            .graph
            .edges_directed(self.cell_nodes[cell], Direction::Incoming)
            .filter_map(|e| *e.weight())
            .collect();
        v.sort_unstable();
        v
    }

    /// How many cells use the trial with this key (more than one: it runs once, for all).
    pub fn users(&self, key: &Key) -> usize {
        self.trial_nodes.get(key).map_or(0, |n| {
            self.graph.edges_directed(*n, Direction::Outgoing).count()
        })
    }

    pub fn artifacts(&self) -> impl Iterator<Item = &Artifact> {
        self.artifact_nodes
            .iter()
            .filter_map(|n| match &self.graph[*n] {
                Node::Artifact(a) => Some(a),
                _ => None,
            })
    }

    /// The cells an artifact is rendered from (empty: it depends on the recipe or the
    /// environment alone).
    pub fn artifact_cells(&self, artifact: &Artifact) -> Vec<usize> {
        let Some(n) = self
            .artifact_nodes
            .iter()
            .find(|n| matches!(&self.graph[**n], Node::Artifact(a) if a == artifact))
        else {
            return Vec::new();
        };
        let mut v: Vec<usize> = self
            .graph
            .neighbors_directed(*n, Direction::Incoming)
            .filter_map(|p| match self.graph[p] {
                Node::Cell(c) => Some(c),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Every node in an order that respects every dependency (the graph is acyclic by
    /// construction: edges only go env → trial → cell → artifact).
    pub fn topological(&self) -> Vec<NodeIndex> {
        petgraph::algo::toposort(&self.graph, None).unwrap_or_default()
    }

    pub fn unique_trials(&self) -> usize {
        self.trial_nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_paths_round_trip() {
        for a in [
            Artifact::MatrixJson,
            Artifact::MatrixMd,
            Artifact::ReportHtml,
            Artifact::ResolvedRecipe,
            Artifact::EnvJson("local".into()),
        ] {
            assert_eq!(Artifact::from_path(&a.path()), Some(a));
        }
        assert_eq!(Artifact::from_path("environments//env.json"), None);
        assert_eq!(Artifact::from_path("trial_0/result.json"), None);
    }
}
