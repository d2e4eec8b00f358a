//! The DAG's layout, computed here so that the page carries no layout code
//! and the same ledger draws the same picture: layers by longest path from
//! the tasks without dependencies, long edges broken by virtual points (one
//! per layer they cross), a few barycenter sweeps to order each layer
//! (keeping the order with the fewest crossings), then x positions pulled
//! toward their neighbours without overlap. Ties break by plan order;
//! integer arithmetic only. Pure.

use std::collections::VecDeque;

pub const NODE_W: i64 = 168;
pub const NODE_H: i64 = 44;
pub const MARGIN: i64 = 16;
const VIRTUAL_W: i64 = 12;
const GAP_X: i64 = 20;
const GAP_Y: i64 = 64;
/// Sweeps of ordering and of positioning (each one down and one up).
const SWEEPS: usize = 4;
/// Virtual points allowed per task; past that long edges are drawn
/// straight (a bound on time and size for wide, deep plans).
const VIRTUAL_PER_NODE_MAX: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Per node: its layer (0: no dependency).
    pub layer: Vec<usize>,
    /// Per node: the top-left corner of its box (`NODE_W` × `NODE_H`).
    pub x: Vec<i64>,
    pub y: Vec<i64>,
    pub width: i64,
    pub height: i64,
    /// Per edge, in the order given: the points its line passes, from the
    /// bottom of its source to the top of its target.
    pub routes: Vec<Vec<(i64, i64)>>,
}

/// Lay out `n` nodes (in plan order) and `edges` (dependency → dependent;
/// any out of range, or a self-loop, is left out of the drawing).
pub fn layout(n: usize, edges: &[(usize, usize)]) -> Layout {
    let kept: Vec<(usize, usize)> = edges.iter().copied().filter(|&(a, b)| a < n && b < n && a != b).collect();
    let layer = layers(n, &kept);
    let mut g = Virtual::new(n, &layer, &kept);
    g.order();
    let cx = g.positions();
    let top = |l: usize| MARGIN + l as i64 * (NODE_H + GAP_Y);
    let routes = edges
        .iter()
        .map(|&(a, b)| match kept.iter().position(|&e| e == (a, b)) {
            Some(k) => g.route(k, &cx, &top),
            None => Vec::new(),
        })
        .collect();
    let layers_n = layer.iter().max().map_or(0, |m| m + 1) as i64;
    let width = (0..g.width.len()).map(|v| cx[v] + g.width[v] / 2).max().unwrap_or(0) + MARGIN;
    let height = if layers_n == 0 { 2 * MARGIN } else { top(layers_n as usize - 1) + NODE_H + MARGIN };
    Layout {
        x: (0..n).map(|v| cx[v] - NODE_W / 2).collect(),
        y: (0..n).map(|v| top(layer[v])).collect(),
        layer,
        width: width.max(2 * MARGIN),
        height,
        routes,
    }
}

/// Longest path from the roots. A node on a cycle (a ledger the plan
/// checks would have refused) goes below everything else.
fn layers(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        indegree[b] += 1;
        succ[a].push(b);
    }
    let mut layer = vec![0usize; n];
    let mut done = vec![false; n];
    let mut queue: VecDeque<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    while let Some(v) = queue.pop_front() {
        done[v] = true;
        for &w in &succ[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            indegree[w] -= 1;
            if indegree[w] == 0 {
                queue.push_back(w);
            }
        }
    }
    let below = layer.iter().max().map_or(0, |m| m + 1);
    for v in (0..n).filter(|&v| !done[v]) {
        layer[v] = below;
    }
    layer
}

/// The layered graph with virtual points on long edges.
struct Virtual {
    layer: Vec<usize>,
    width: Vec<i64>,
    pred: Vec<Vec<usize>>,
    succ: Vec<Vec<usize>>,
    /// Per kept edge: the vertices it passes, source first.
    chains: Vec<Vec<usize>>,
    /// Per layer: its vertices, in order.
    rows: Vec<Vec<usize>>,
}

impl Virtual {
    fn new(n: usize, layer: &[usize], edges: &[(usize, usize)]) -> Virtual {
        let spans: usize = edges.iter().map(|&(a, b)| layer[b].saturating_sub(layer[a] + 1)).sum();
        let split = spans <= VIRTUAL_PER_NODE_MAX * n.max(1);
        let mut g = Virtual {
            layer: layer.to_vec(),
            width: vec![NODE_W; n],
            pred: vec![Vec::new(); n],
            succ: vec![Vec::new(); n],
            chains: Vec::with_capacity(edges.len()),
            rows: Vec::new(),
        };
        for &(a, b) in edges {
            let mut chain = vec![a];
            if split && layer[b] > layer[a] {
                for l in layer[a] + 1..layer[b] {
                    chain.push(g.add_virtual(l));
                }
            }
            chain.push(b);
            for pair in chain.windows(2) {
                g.succ[pair[0]].push(pair[1]);
                g.pred[pair[1]].push(pair[0]);
            }
            g.chains.push(chain);
        }
        let layers_n = g.layer.iter().max().map_or(0, |m| m + 1);
        g.rows = vec![Vec::new(); layers_n];
        for v in 0..g.layer.len() {
            g.rows[g.layer[v]].push(v);
        }
        g
    }

    fn add_virtual(&mut self, l: usize) -> usize {
        self.layer.push(l);
        self.width.push(VIRTUAL_W);
        self.pred.push(Vec::new());
        self.succ.push(Vec::new());
        self.layer.len() - 1
    }

    /// Barycenter sweeps, keeping the order with the fewest crossings.
    fn order(&mut self) {
        let mut pos = self.index();
        let mut best = (self.crossings(&pos), self.rows.clone());
        for _ in 0..SWEEPS {
            for l in 1..self.rows.len() {
                self.sort_row(l, &mut pos, true);
            }
            for l in (0..self.rows.len().saturating_sub(1)).rev() {
                self.sort_row(l, &mut pos, false);
            }
            let crossings = self.crossings(&pos);
            if crossings < best.0 {
                best = (crossings, self.rows.clone());
            }
        }
        self.rows = best.1;
    }

    fn index(&self) -> Vec<usize> {
        let mut pos = vec![0; self.layer.len()];
        for row in &self.rows {
            for (i, &v) in row.iter().enumerate() {
                pos[v] = i;
            }
        }
        pos
    }

    /// Order row `l` by the mean position of each vertex's neighbours
    /// above (`down`) or below; one without any keeps its place.
    fn sort_row(&mut self, l: usize, pos: &mut [usize], down: bool) {
        let mut keyed: Vec<(u64, usize, usize)> = self.rows[l]
            .iter()
            .map(|&v| {
                let near = if down { &self.pred[v] } else { &self.succ[v] };
                // Scaled by 1024 to keep the mean in integers.
                let key = if near.is_empty() {
                    pos[v] as u64 * 1024
                } else {
                    near.iter().map(|&u| pos[u] as u64 * 1024).sum::<u64>() / near.len() as u64
                };
                (key, pos[v], v)
            })
            .collect();
        keyed.sort_unstable();
        self.rows[l] = keyed.into_iter().map(|(_, _, v)| v).collect();
        for (i, &v) in self.rows[l].iter().enumerate() {
            pos[v] = i;
        }
    }

    /// Edge crossings between adjacent layers (inversions, counted with a
    /// Fenwick tree).
    fn crossings(&self, pos: &[usize]) -> u64 {
        let mut total = 0u64;
        for l in 0..self.rows.len().saturating_sub(1) {
            let mut pairs: Vec<(usize, usize)> = self.rows[l]
                .iter()
                .flat_map(|&u| self.succ[u].iter().filter(|&&w| self.layer[w] == l + 1).map(move |&w| (pos[u], pos[w])))
                .collect();
            pairs.sort_unstable();
            let size = self.rows[l + 1].len() + 1;
            let mut tree = vec![0u64; size + 1];
            for (seen, &(_, p)) in pairs.iter().enumerate() {
                // Earlier pairs ending right of this one cross it.
                let mut at_most = 0u64;
                let mut i = p + 1;
                while i > 0 {
                    at_most += tree[i];
                    i -= i & i.wrapping_neg();
                }
                total += seen as u64 - at_most;
                let mut i = p + 1;
                while i <= size {
                    tree[i] += 1;
                    i += i & i.wrapping_neg();
                }
            }
        }
        total
    }

    /// x centres: packed left to right, then pulled toward the mean of
    /// their neighbours, each row kept in order and apart (the mean of the
    /// leftmost and rightmost placement that keeps both).
    fn positions(&self) -> Vec<i64> {
        let mut cx = vec![0i64; self.layer.len()];
        for row in &self.rows {
            let mut at = 0;
            for (i, &v) in row.iter().enumerate() {
                at = if i == 0 { self.width[v] / 2 } else { at + self.gap(row[i - 1], v) };
                cx[v] = at;
            }
        }
        for _ in 0..SWEEPS {
            for l in 1..self.rows.len() {
                self.pull(l, &mut cx, true);
            }
            for l in (0..self.rows.len().saturating_sub(1)).rev() {
                self.pull(l, &mut cx, false);
            }
        }
        let left = (0..cx.len()).map(|v| cx[v] - self.width[v] / 2).min().unwrap_or(0);
        cx.iter().map(|x| x - left + MARGIN).collect()
    }

    fn gap(&self, a: usize, b: usize) -> i64 {
        (self.width[a] + self.width[b]) / 2 + GAP_X
    }

    fn pull(&self, l: usize, cx: &mut [i64], down: bool) {
        let row = &self.rows[l];
        let want: Vec<i64> = row
            .iter()
            .map(|&v| {
                let near = if down { &self.pred[v] } else { &self.succ[v] };
                if near.is_empty() {
                    cx[v]
                } else {
                    near.iter().map(|&u| cx[u]).sum::<i64>().div_euclid(near.len() as i64)
                }
            })
            .collect();
        let k = row.len();
        let mut fwd = want.clone();
        for i in 1..k {
            fwd[i] = fwd[i].max(fwd[i - 1] + self.gap(row[i - 1], row[i]));
        }
        let mut bwd = want;
        for i in (0..k.saturating_sub(1)).rev() {
            bwd[i] = bwd[i].min(bwd[i + 1] - self.gap(row[i], row[i + 1]));
        }
        for i in 0..k {
            cx[row[i]] = (fwd[i] + bwd[i]).div_euclid(2);
        }
    }

    fn route(&self, k: usize, cx: &[i64], top: &dyn Fn(usize) -> i64) -> Vec<(i64, i64)> {
        let chain = &self.chains[k];
        let (Some(&first), Some(&last)) = (chain.first(), chain.last()) else { return Vec::new() };
        let mut points = vec![(cx[first], top(self.layer[first]) + NODE_H)];
        for &d in &chain[1..chain.len() - 1] {
            points.push((cx[d], top(self.layer[d])));
            points.push((cx[d], top(self.layer[d]) + NODE_H));
        }
        points.push((cx[last], top(self.layer[last])));
        points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random DAG: edges only from lower to higher
    /// index, so it is acyclic.
    fn random_dag(n: usize, per_node: usize, seed: u64) -> Vec<(usize, usize)> {
        let mut s = seed;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut edges = Vec::new();
        for b in 1..n {
            for _ in 0..per_node {
                let a = (next() % b as u64) as usize;
                if !edges.contains(&(a, b)) {
                    edges.push((a, b));
                }
            }
        }
        edges
    }

    fn overlaps(l: &Layout) -> Vec<(usize, usize)> {
        let n = l.x.len();
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by_key(|&i| (l.y[i], l.x[i]));
        let mut out = Vec::new();
        for w in idx.windows(2) {
            let (a, b) = (w[0], w[1]);
            if l.y[a] == l.y[b] && l.x[b] < l.x[a] + NODE_W {
                out.push((a, b));
            }
        }
        // Boxes of different layers never share a row band.
        for i in 0..n {
            for j in i + 1..n.min(i + 50) {
                if l.y[i] != l.y[j] {
                    assert!((l.y[i] - l.y[j]).abs() >= NODE_H, "layers overlap: {i} {j}");
                }
            }
        }
        out
    }

    #[test]
    fn no_box_overlaps_another() {
        for (n, per, seed) in [(1, 0, 1), (12, 1, 7), (100, 2, 3), (400, 3, 11)] {
            let edges = random_dag(n, per, seed);
            let l = layout(n, &edges);
            assert!(overlaps(&l).is_empty(), "n={n}: {:?}", overlaps(&l));
            for i in 0..n {
                assert!(l.x[i] >= MARGIN && l.x[i] + NODE_W <= l.width, "node {i} outside the drawing");
                assert!(l.y[i] >= MARGIN && l.y[i] + NODE_H <= l.height, "node {i} outside the drawing");
            }
        }
    }

    #[test]
    fn every_edge_points_down_and_long_edges_pass_between_boxes() {
        let edges = random_dag(150, 2, 5);
        let l = layout(150, &edges);
        for (k, &(a, b)) in edges.iter().enumerate() {
            assert!(l.layer[b] > l.layer[a], "edge {a}->{b} does not go down a layer");
            let r = &l.routes[k];
            assert_eq!(r.first(), Some(&(l.x[a] + NODE_W / 2, l.y[a] + NODE_H)));
            assert_eq!(r.last(), Some(&(l.x[b] + NODE_W / 2, l.y[b])));
            assert!(r.windows(2).all(|w| w[1].1 >= w[0].1), "route {k} goes up: {r:?}");
            // A virtual point never sits inside a task's box.
            for &(px, py) in &r[1..r.len() - 1] {
                for i in 0..150 {
                    let inside = px > l.x[i] && px < l.x[i] + NODE_W && py > l.y[i] && py < l.y[i] + NODE_H;
                    assert!(!inside, "edge {a}->{b} passes through node {i}");
                }
            }
        }
    }

    #[test]
    fn layers_are_longest_paths() {
        // 0 -> 1 -> 2, and 0 -> 2 directly: 2 is on layer 2.
        let l = layout(4, &[(0, 1), (1, 2), (0, 2)]);
        assert_eq!(l.layer, vec![0, 1, 2, 0]);
    }

    #[test]
    fn the_same_graph_gives_the_same_layout() {
        let edges = random_dag(300, 3, 9);
        let a = layout(300, &edges);
        let b = layout(300, &edges);
        assert_eq!(a, b);
    }

    #[test]
    fn sweeps_untangle_a_crossed_pair() {
        // Plan order puts 2 (child of 1) before 3 (child of 0): the layout
        // draws them uncrossed.
        let l = layout(4, &[(1, 2), (0, 3)]);
        assert!((l.x[0] < l.x[1]) == (l.x[3] < l.x[2]), "{l:?}");
    }

    #[test]
    fn a_cycle_or_a_bad_edge_does_not_hang_or_panic() {
        let l = layout(3, &[(0, 1), (1, 0), (2, 9), (2, 2)]);
        assert_eq!(l.routes.len(), 4);
        assert!(l.routes[2].is_empty() && l.routes[3].is_empty());
        assert_eq!(layout(0, &[]).width, 2 * MARGIN);
    }
}
