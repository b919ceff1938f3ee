//! The rules a crate's use graph must keep: the arrows ARCHITECTURE.md's
//! layer table allows, all of them used, and no circle between the files and
//! folders of any folder.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::graph::{FileName, Graph};

/// One broken rule. `key` names it exactly (what an exception matches);
/// `detail` says how it comes about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub key: String,
    pub detail: String,
}

/// The layer table: each layer (a folder `name/` or a file `name.rs` of
/// `src/`) and what it may use, `None` for anything.
pub struct Table {
    pub layers: BTreeMap<String, Option<Vec<String>>>,
}

const HEADER: &str = "| layer | may use |";

/// Reads the table under the `| layer | may use |` header: each row names
/// its layers and the layers (or folders/files inside them) they may use in
/// backticks, or says `anything` or `nothing`.
pub fn read_table(markdown: &str) -> Result<Table, String> {
    let mut lines = markdown.lines().skip_while(|l| l.trim() != HEADER);
    if lines.next().is_none() {
        return Err(format!("no table with the header {HEADER:?}"));
    }
    let mut layers = BTreeMap::new();
    for line in lines.skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        let [names, may] = cells[..] else {
            return Err(format!("a row of two cells expected: {line}"));
        };
        let may = if may.contains("anything") {
            None
        } else {
            let listed = backticked(may);
            if listed.is_empty() && !may.contains("nothing") {
                return Err(format!("say `anything`, `nothing` or list layers: {line}"));
            }
            Some(listed)
        };
        let names = backticked(names);
        if names.is_empty() {
            return Err(format!("no layer named in: {line}"));
        }
        for name in names {
            if layers.insert(name.clone(), may.clone()).is_some() {
                return Err(format!("layer `{name}` listed twice"));
            }
        }
    }
    Ok(Table { layers })
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The layer a file belongs to: its top folder (`sim/`) or itself (`cli.rs`).
fn layer_of(file: &str) -> String {
    match file.find('/') {
        Some(i) => file[..=i].to_string(),
        None => file.to_string(),
    }
}

fn covers(entry: &str, file: &str) -> bool {
    file == entry || (entry.ends_with('/') && file.starts_with(entry))
}

/// Every use that crosses from one layer to another the table does not
/// allow, every layer missing from the table or from `src/`, and every
/// allowed arrow that no file uses.
pub fn layer_findings(graph: &Graph, table: &Table) -> Vec<Finding> {
    let mut findings = Vec::new();
    let present: BTreeSet<String> = graph.uses.keys().map(|f| layer_of(f)).collect();
    for layer in &present {
        if !table.layers.contains_key(layer) {
            findings.push(Finding {
                key: format!("src/{layer} is not in ARCHITECTURE.md's layer table"),
                detail: "add a row saying what it may use".into(),
            });
        }
    }
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    for (from, targets) in &graph.uses {
        let layer = layer_of(from);
        let Some(Some(may)) = table.layers.get(&layer) else {
            continue;
        };
        for to in targets {
            if layer_of(to) == layer {
                continue;
            }
            match may.iter().find(|entry| covers(entry, to)) {
                Some(entry) => {
                    used.insert((layer.clone(), entry.clone()));
                }
                None => findings.push(Finding {
                    key: format!("src/{from} uses src/{to}"),
                    detail: format!("ARCHITECTURE.md does not let {layer} use {}", layer_of(to)),
                }),
            }
        }
    }
    for (layer, may) in &table.layers {
        if !present.contains(layer) {
            findings.push(Finding {
                key: format!("ARCHITECTURE.md lists `{layer}`, which is not in src/"),
                detail: "remove its row".into(),
            });
            continue;
        }
        for entry in may.iter().flatten() {
            if !used.contains(&(layer.clone(), entry.clone())) {
                findings.push(Finding {
                    key: format!("ARCHITECTURE.md lets `{layer}` use `{entry}`, which it does not"),
                    detail: "an arrow no file has: remove it".into(),
                });
            }
        }
    }
    findings
}

/// `.rs` files under `src/` the crate never reads.
pub fn unreached_findings(graph: &Graph) -> Vec<Finding> {
    graph
        .unreached
        .iter()
        .map(|f| Finding {
            key: format!("src/{f} is not declared by any mod"),
            detail: "the compiler never reads it: declare it or delete it".into(),
        })
        .collect()
}

/// Circles among the entries (files and sub-folders) of every folder: each
/// set of entries that reach each other through uses, with one circle
/// through them for the reader.
pub fn circle_findings(graph: &Graph) -> Vec<Finding> {
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for file in graph.uses.keys() {
        let mut dir = String::new();
        dirs.insert(dir.clone());
        for part in file
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            dir.push_str(part);
            dir.push('/');
            dirs.insert(dir.clone());
        }
    }
    let mut findings = Vec::new();
    for dir in dirs {
        // The entry of `dir` a file is in, if it is in `dir` at all.
        let entry = |file: &str| -> Option<String> {
            let rest = file.strip_prefix(dir.as_str())?;
            Some(match rest.find('/') {
                Some(i) => rest[..=i].to_string(),
                None => rest.to_string(),
            })
        };
        let mut edges: BTreeMap<String, BTreeMap<String, (FileName, FileName)>> = BTreeMap::new();
        for (from, targets) in &graph.uses {
            let Some(a) = entry(from) else { continue };
            edges.entry(a.clone()).or_default();
            for to in targets {
                if let Some(b) = entry(to) {
                    if a != b {
                        edges
                            .entry(a.clone())
                            .or_default()
                            .entry(b)
                            .or_insert_with(|| (from.clone(), to.clone()));
                    }
                }
            }
        }
        for members in strongly_connected(&edges) {
            let cycle = shortest_cycle(&edges, &members);
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let (f, t) = &edges[&w[0]][&w[1]];
                    format!("src/{f} uses src/{t}")
                })
                .collect();
            findings.push(Finding {
                key: format!(
                    "circle in src/{dir}: {}",
                    members.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                detail: format!("{} ({})", cycle.join(" -> "), steps.join("; ")),
            });
        }
    }
    findings
}

type Edges = BTreeMap<String, BTreeMap<String, (FileName, FileName)>>;

/// The sets of two or more nodes that all reach each other (Tarjan).
fn strongly_connected(edges: &Edges) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flat_map(|t| t.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The shortest circle through the first member, inside the members, as
/// `[a, b, ..., a]`.
fn shortest_cycle(edges: &Edges, members: &BTreeSet<String>) -> Vec<String> {
    let start = members.iter().next().unwrap();
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start.as_str()]);
    while let Some(v) = queue.pop_front() {
        for w in edges[v].keys().filter(|w| members.contains(*w)) {
            if w == start {
                let mut path = vec![start.clone()];
                let mut at = v;
                while at != start {
                    path.push(at.to_string());
                    at = came_from[at];
                }
                path.push(start.clone());
                path.reverse();
                return path;
            }
            if !came_from.contains_key(w.as_str()) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start.clone()]
}
