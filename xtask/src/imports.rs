//! `cargo xtask imports [--max N]`: the import graph between the files of `src/`, from the
//! `crate::` and `super::` paths their code (not their comments) names (names the crate root
//! re-exports count as the file they come from), and its cycles (the strongly connected
//! components of more than one file). With `--max N` it fails when a cycle holds more than N
//! files. It always fails when a file imports a layer above its own ([`LAYERS`]) and when a
//! function in `src/` is longer than [`MAX_FN_LINES`] lines. Paths are read textually: a path is
//! attributed to the deepest module file it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first: a file may import its own layer and those below it. Files not
/// listed (`lib.rs`) sit above all.
pub const LAYERS: &[(&str, &[&str])] = &[
    ("foundation", &["error.rs", "util.rs"]),
    ("vulkan", &["vk/"]),
    ("trace", &["trace/"]),
    ("recording", &["record/"]),
    ("executor", &["executor/"]),
    ("crypto", &["crypto/"]),
];

/// The longest function allowed in `src/`, in lines from its signature to its closing brace.
pub const MAX_FN_LINES: usize = 120;

fn layer_of(file: &str) -> usize {
    LAYERS.iter().position(|(_, prefixes)| prefixes.iter().any(|p| file.starts_with(p))).unwrap_or(LAYERS.len())
}

fn layer_name(i: usize) -> &'static str {
    LAYERS.get(i).map_or("the crate root", |l| l.0)
}

/// The names the crate root re-exports (`pub use a::b::{X, Y};` and `pub use a::b;`), mapped to
/// the module path they come from.
fn root_reexports(lib: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut text = lib.replace('\n', " ");
    while let Some(at) = text.find("pub use ") {
        text = text[at + 8..].to_string();
        let end = text.find(';').unwrap_or(text.len());
        let stmt: String = text[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let (base, names) = match stmt.find("::{") {
            Some(b) => (
                stmt[..b].to_string(),
                stmt[b + 3..].trim_end_matches('}').split(',').map(|n| n.trim().to_string()).collect(),
            ),
            None => match stmt.rfind("::") {
                Some(b) => (stmt.to_string(), vec![stmt[b + 2..].to_string()]),
                None => continue,
            },
        };
        let module: Vec<String> = base.split("::").map(String::from).collect();
        for n in names.into_iter().filter(|n| !n.is_empty()) {
            out.insert(n, module.clone());
        }
    }
    out
}

/// Functions in `text` longer than [`MAX_FN_LINES`]: (name, first line, lines).
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim_start();
        let code = code
            .strip_prefix("pub(crate) ")
            .or_else(|| code.strip_prefix("pub(super) "))
            .or_else(|| code.strip_prefix("pub "))
            .unwrap_or(code);
        let code = code.strip_prefix("const ").unwrap_or(code);
        let code = code.strip_prefix("async ").unwrap_or(code);
        let code = code.strip_prefix("unsafe ").unwrap_or(code);
        let Some(rest) = code.strip_prefix("fn ") else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            let l = strip_literals(l.split("//").next().unwrap_or(""));
            if !opened && l.trim_end().ends_with(';') && !l.contains('{') {
                break; // a declaration without a body
            }
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth == 0 {
                if j - i + 1 > MAX_FN_LINES {
                    out.push((name.clone(), i + 1, j - i + 1));
                }
                break;
            }
        }
    }
    out
}

/// `line` without the contents of string and character literals (whose braces do not count).
fn strip_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' if matches!(chars.clone().nth(1), Some('\'')) => {
                chars.next();
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every `.rs` file under `dir`, as its path relative to `src`.
fn files(dir: &Path, src: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, src, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The module path of a file: `executor/mod.rs` is `executor`, `executor/core.rs` is
/// `executor::core`, `lib.rs` is the crate (empty).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The paths that follow each `crate::` or `super::` in a line, braces expanded one level.
fn paths_in(line: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(module))] {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut heads = Vec::new();
            if let Some(inner) = rest.strip_prefix('{') {
                let end = inner.find('}').unwrap_or(inner.len());
                heads.extend(inner[..end].split(',').map(str::trim).map(String::from));
            } else {
                heads.push(rest.to_string());
            }
            for head in heads {
                let mut path = base.clone();
                path.extend(
                    head.split("::")
                        .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
                        .take_while(|s| !s.is_empty()),
                );
                found.push(path);
            }
        }
    }
    found
}

/// The module `super` names from `module` (for `executor/mod.rs`, module `executor`, the crate).
fn parent(module: &[String]) -> Vec<String> {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// The file a module path resolves to: its deepest prefix that is a module file.
fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, String>) -> Option<String> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]).cloned())
}

/// Tarjan's strongly connected components.
fn components(nodes: &[String], edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    fn visit(v: &str, s: &mut State) {
        let i = s.index.len();
        s.index.insert(v.to_string(), i);
        s.low.insert(v.to_string(), i);
        s.stack.push(v.to_string());
        s.on.insert(v.to_string());
        for w in s.edges.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(&w) {
                visit(&w, s);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = w == v;
                c.push(w);
                if done {
                    break;
                }
            }
            c.sort();
            s.out.push(c);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in nodes {
        if !s.index.contains_key(n) {
            visit(n, &mut s);
        }
    }
    s.out
}

pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let max: Option<usize> = match args {
        [] => None,
        [flag, n] if flag == "--max" => Some(n.parse().map_err(|_| format!("--max: not a number: {n}"))?),
        _ => return Err("usage: cargo xtask imports [--max N]".into()),
    };
    let src = root.join("src");
    let mut all = Vec::new();
    files(&src, &src, &mut all);
    all.sort();
    let modules: BTreeMap<Vec<String>, String> = all.iter().map(|f| (module_of(f), f.clone())).collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).map_err(|e| format!("lib.rs: {e}"))?;
    let reexports = root_reexports(&lib);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut long = Vec::new();
    for file in &all {
        let text = std::fs::read_to_string(src.join(file)).map_err(|e| format!("{file}: {e}"))?;
        let module = module_of(file);
        long.extend(
            long_functions(&text).into_iter().map(|(name, line, n)| format!("{file}:{line}: fn {name} is {n} lines")),
        );
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for mut path in paths_in(code, &module) {
                if let Some(m) = path.first().and_then(|head| reexports.get(head)) {
                    if path.len() == 1 || !modules.contains_key(&path[..1]) {
                        path = m.clone();
                    }
                }
                if let Some(target) = resolve(&path, &modules) {
                    if &target != file && target != "lib.rs" {
                        edges.entry(file.clone()).or_default().insert(target);
                    }
                }
            }
        }
    }
    let cycles: Vec<Vec<String>> = components(&all, &edges).into_iter().filter(|c| c.len() > 1).collect();
    let largest = cycles.iter().map(Vec::len).max().unwrap_or(0);
    println!("xtask: {} files, {} imports between them", all.len(), edges.values().map(BTreeSet::len).sum::<usize>());
    for c in &cycles {
        println!("xtask: a cycle of {} files: {}", c.len(), c.join(", "));
        for f in c {
            let inside: Vec<&String> = edges.get(f).into_iter().flatten().filter(|t| c.contains(t)).collect();
            println!("    {f} -> {}", inside.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
        }
    }
    println!("xtask: the largest cycle holds {largest} files");
    let mut upward = Vec::new();
    for (from, targets) in &edges {
        for to in targets {
            if layer_of(to) > layer_of(from) {
                upward.push(format!(
                    "{from} ({}) imports {to} ({})",
                    layer_name(layer_of(from)),
                    layer_name(layer_of(to))
                ));
            }
        }
    }
    let names: Vec<&str> = LAYERS.iter().map(|l| l.0).collect();
    println!("xtask: layers, lowest first: {}; {} upward imports", names.join(", "), upward.len());
    for u in &upward {
        println!("    {u}");
    }
    println!("xtask: {} functions over {MAX_FN_LINES} lines", long.len());
    for l in &long {
        println!("    {l}");
    }
    let mut errors = Vec::new();
    if let Some(m) = max.filter(|&m| largest > m) {
        errors.push(format!("a cycle of {largest} files, more than {m}"));
    }
    if !upward.is_empty() {
        errors.push(format!("{} imports of a higher layer", upward.len()));
    }
    if !long.is_empty() {
        errors.push(format!("{} functions over {MAX_FN_LINES} lines", long.len()));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}
