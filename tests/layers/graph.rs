//! Which source file uses which: the crate's modules read with `syn` from its
//! roots (`lib.rs`, `main.rs`) by following `mod` declarations, and every path
//! they name (in `use` trees, code, types, patterns, macro bodies, every
//! attribute's tokens and serde's strings) resolved to the file that defines what it names. Only
//! `#[cfg(test)] mod` items are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A source file, as a path relative to `src/` with `/` separators.
pub type FileName = String;

/// The files of a crate and, for each, the other files it uses.
pub struct Graph {
    pub uses: BTreeMap<FileName, BTreeSet<FileName>>,
    /// `.rs` files under `src/` that no `mod` declaration reaches (outside
    /// test modules): the compiler never reads them.
    pub unreached: Vec<FileName>,
}

type ModId = usize;

/// One module: a file, or a `mod name { ... }` inside one.
#[derive(Default)]
struct Module {
    parent: Option<ModId>,
    root: ModId,
    file: FileName,
    children: BTreeMap<String, ModId>,
    /// Names of the items defined here (structs, functions, traits...).
    items: BTreeSet<String>,
    /// `use` leaves by the name they bind: the path as written.
    aliases: BTreeMap<String, Vec<String>>,
    /// `use path::*` sources, as written.
    globs: Vec<Vec<String>>,
    /// `pub use path::*`: this module serves all of `path`, so uses it.
    reexported_globs: Vec<Vec<String>>,
    /// Every path of two or more segments named in this module's code, as
    /// written.
    paths: Vec<Vec<String>>,
    /// Every one-segment name in its code: what it takes from glob imports.
    names: BTreeSet<String>,
    /// The module invokes macros at item level: it may define names no
    /// parser sees.
    opaque: bool,
}

/// What a path names: a module, what some files define, or something outside
/// the crate.
enum Res {
    Module(ModId),
    Files(Vec<FileName>),
    External,
}

struct Crate {
    src: PathBuf,
    modules: Vec<Module>,
    lib_root: Option<ModId>,
    /// The files and folders of `#[cfg(test)] mod name;`: not part of what
    /// the layers describe.
    test_files: Vec<String>,
    problems: Vec<String>,
}

/// Reads the crate whose sources are in `src` (`lib.rs` and/or `main.rs`;
/// `main.rs` reaches the library as `llmprobe::`).
pub fn read(src: &Path) -> Result<Graph, String> {
    let mut krate = Crate {
        src: src.to_path_buf(),
        modules: Vec::new(),
        lib_root: None,
        test_files: Vec::new(),
        problems: Vec::new(),
    };
    for root in ["lib.rs", "main.rs"] {
        if src.join(root).exists() {
            let id = krate.load_file(None, root.to_string());
            if root == "lib.rs" {
                krate.lib_root = Some(id);
            }
        }
    }
    if !krate.problems.is_empty() {
        return Err(krate.problems.join("\n"));
    }
    let mut uses: BTreeMap<FileName, BTreeSet<FileName>> = BTreeMap::new();
    for id in 0..krate.modules.len() {
        let from = krate.modules[id].file.clone();
        let entry = uses.entry(from.clone()).or_default();
        let module = &krate.modules[id];
        let mut found = Vec::new();
        // A path that names a whole module (`use crate::stats;`) uses
        // nothing yet: what is used through it is found by the paths that
        // go on through the name it binds.
        for path in &module.paths {
            if let Res::Files(files) = krate.resolve(id, path, 0) {
                found.extend(files);
            }
        }
        for glob in &module.reexported_globs {
            if let Res::Module(m) = krate.resolve(id, glob, 0) {
                found.push(krate.modules[m].file.clone());
            }
        }
        for name in &module.names {
            if let Some(Res::Files(files)) = krate.lookup_in_globs(id, name, 0) {
                found.extend(files);
            }
        }
        entry.extend(found.into_iter().filter(|f| *f != from));
    }
    let mut all = Vec::new();
    rust_files(src, src, &mut all);
    let reached: BTreeSet<&str> = krate.modules.iter().map(|m| m.file.as_str()).collect();
    let unreached = all
        .into_iter()
        .filter(|f| {
            !reached.contains(f.as_str()) && !krate.test_files.iter().any(|t| f.starts_with(t))
        })
        .collect();
    Ok(Graph { uses, unreached })
}

fn rust_files(src: &Path, dir: &Path, out: &mut Vec<FileName>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(relative(src, &path));
        }
    }
}

fn relative(src: &Path, path: &Path) -> FileName {
    let rel = path.strip_prefix(src).unwrap_or(path);
    rel.iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Where the files of a file's child modules live, with a trailing `/` (or
/// empty for the crate's folder): `a/mod.rs` and `lib.rs` hold their
/// children beside them, `a/b.rs` in `a/b/`.
fn child_dir(file: &str) -> String {
    let (dir, name) = match file.rfind('/') {
        Some(i) => (&file[..=i], &file[i + 1..]),
        None => ("", file),
    };
    match name {
        "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
        _ => format!("{dir}{}/", name.trim_end_matches(".rs")),
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(list) => list.path.is_ident("cfg") && list.tokens.to_string() == "test",
        _ => false,
    })
}

impl Crate {
    fn new_module(&mut self, parent: Option<ModId>, file: FileName) -> ModId {
        let id = self.modules.len();
        let root = parent.map_or(id, |p| self.modules[p].root);
        self.modules.push(Module {
            parent,
            root,
            file,
            ..Module::default()
        });
        id
    }

    /// Parses one file as a module (a crate root when `parent` is `None`).
    fn load_file(&mut self, parent: Option<ModId>, file: FileName) -> ModId {
        let id = self.new_module(parent, file.clone());
        let text = match fs::read_to_string(self.src.join(&file)) {
            Ok(text) => text,
            Err(e) => {
                self.problems.push(format!("src/{file}: {e}"));
                return id;
            }
        };
        match syn::parse_file(&text) {
            Ok(parsed) => self.load_items(id, &parsed.items, &child_dir(&file)),
            Err(e) => self
                .problems
                .push(format!("src/{file}: does not parse: {e}")),
        }
        id
    }

    fn load_items(&mut self, id: ModId, items: &[syn::Item], dir: &str) {
        for item in items {
            match item {
                syn::Item::Mod(module) => self.load_mod(id, module, dir),
                other => {
                    if let Some(name) = item_name(other) {
                        self.modules[id].items.insert(name);
                    }
                    if matches!(other, syn::Item::Macro(m) if !m.mac.path.is_ident("macro_rules")) {
                        self.modules[id].opaque = true;
                    }
                    let mut reader = PathReader {
                        module: &mut self.modules[id],
                    };
                    reader.visit_item(other);
                }
            }
        }
    }

    fn load_mod(&mut self, parent: ModId, module: &syn::ItemMod, dir: &str) {
        let name = module.ident.to_string();
        if is_cfg_test(&module.attrs) {
            if module.content.is_none() {
                self.test_files.push(format!("{dir}{name}.rs"));
                self.test_files.push(format!("{dir}{name}/"));
            }
            return;
        }
        let file = self.modules[parent].file.clone();
        if module.attrs.iter().any(|a| a.path().is_ident("path")) {
            self.problems.push(format!(
                "src/{file}: `#[path]` on mod {name} is not read by this check"
            ));
            return;
        }
        {
            let mut reader = PathReader {
                module: &mut self.modules[parent],
            };
            for attr in &module.attrs {
                reader.visit_attribute(attr);
            }
        }
        match &module.content {
            Some((_, items)) => {
                let id = self.new_module(Some(parent), file);
                self.modules[parent].children.insert(name.clone(), id);
                self.load_items(id, items, &format!("{dir}{name}/"));
            }
            None => {
                let flat = format!("{dir}{name}.rs");
                let nested = format!("{dir}{name}/mod.rs");
                let path = if self.src.join(&flat).exists() {
                    flat
                } else if self.src.join(&nested).exists() {
                    nested
                } else {
                    self.problems
                        .push(format!("src/{file}: no file for mod {name}"));
                    return;
                };
                let id = self.load_file(Some(parent), path);
                self.modules[parent].children.insert(name, id);
            }
        }
    }

    fn parent(&self, id: ModId) -> Option<ModId> {
        self.modules[id].parent
    }

    /// What `path`, written in module `scope`, names.
    fn resolve(&self, scope: ModId, path: &[String], depth: usize) -> Res {
        if depth > 24 || path.is_empty() {
            return Res::External;
        }
        let mut at = match path[0].as_str() {
            "crate" | "$crate" => self.modules[scope].root,
            "self" => scope,
            "super" => match self.parent(scope) {
                Some(p) => p,
                None => return Res::External,
            },
            "llmprobe" if self.lib_root.is_some_and(|l| l != self.modules[scope].root) => {
                self.lib_root.unwrap()
            }
            first => match self.lookup(scope, first, depth) {
                Some(Res::Module(m)) => m,
                Some(res) => return res,
                None => return Res::External,
            },
        };
        let mut rest = &path[1..];
        while let Some(seg) = rest.first() {
            if seg == "super" {
                match self.parent(at) {
                    Some(p) => at = p,
                    None => return Res::External,
                }
            } else {
                match self.lookup(at, seg, depth) {
                    Some(Res::Module(m)) => at = m,
                    Some(res) => return res,
                    // Not found: a name some macro defines, or a typo the
                    // compiler reports. The module is what is used.
                    None => return Res::Files(vec![self.modules[at].file.clone()]),
                }
            }
            rest = &rest[1..];
        }
        Res::Module(at)
    }

    /// What `name` means inside module `at`: a child module, an item, an
    /// import, or a name a glob import brings.
    fn lookup(&self, at: ModId, name: &str, depth: usize) -> Option<Res> {
        let module = &self.modules[at];
        if let Some(&child) = module.children.get(name) {
            return Some(Res::Module(child));
        }
        if module.items.contains(name) {
            return Some(Res::Files(vec![module.file.clone()]));
        }
        if let Some(target) = module.aliases.get(name) {
            return Some(match self.resolve(at, target, depth + 1) {
                // An import of something outside the crate: this module is
                // what its user depends on.
                Res::External => Res::Files(vec![module.file.clone()]),
                res => res,
            });
        }
        self.lookup_in_globs(at, name, depth)
    }

    /// What `name` means in module `at` through its `use path::*` imports.
    fn lookup_in_globs(&self, at: ModId, name: &str, depth: usize) -> Option<Res> {
        let module = &self.modules[at];
        let mut opaque = Vec::new();
        for glob in &module.globs {
            if let Res::Module(source) = self.resolve(at, glob, depth + 1) {
                if let Some(res) = self.lookup(source, name, depth + 1) {
                    return Some(res);
                }
                if self.modules[source].opaque {
                    opaque.push(self.modules[source].file.clone());
                }
            }
        }
        if !opaque.is_empty() {
            return Some(Res::Files(opaque));
        }
        None
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Collects the paths a module's code names.
struct PathReader<'a> {
    module: &'a mut Module,
}

impl PathReader<'_> {
    /// Records a `use` tree's leaves; a public glob (`pub use x::*`)
    /// re-exports, so it is a use of its source.
    fn add_use(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_use(prefix, &p.tree, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let (path, bound) = if name == "self" {
                    (prefix.clone(), prefix.last().cloned())
                } else {
                    let mut path = prefix.clone();
                    path.push(name.clone());
                    (path, Some(name))
                };
                self.bind(path, bound);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                let name = r.ident.to_string();
                if name != "self" {
                    path.push(name);
                }
                self.bind(path, Some(r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => {
                if public {
                    self.module.reexported_globs.push(prefix.clone());
                }
                self.module.globs.push(prefix.clone());
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.add_use(prefix, tree, public);
                }
            }
        }
    }

    fn add_path(&mut self, mut path: Vec<String>) {
        if path.len() == 1 {
            self.module.names.insert(path.pop().unwrap());
        } else if !path.is_empty() {
            self.module.paths.push(path);
        }
    }

    fn bind(&mut self, path: Vec<String>, name: Option<String>) {
        if let Some(name) = name.filter(|n| n != "_") {
            self.module.aliases.insert(name, path.clone());
        }
        self.module.paths.push(path);
    }

    /// Paths inside a macro's tokens (`a::b::c`, `$crate::x`), which the
    /// parser leaves unread.
    fn add_token_paths(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.add_token_paths(g.stream());
                    i += 1;
                }
                TokenTree::Ident(_) | TokenTree::Punct(_) => {
                    let mut path = Vec::new();
                    let mut j = i;
                    if is_punct(&tokens, j, '$') {
                        if let Some(TokenTree::Ident(id)) = tokens.get(j + 1) {
                            if id == "crate" {
                                path.push("$crate".to_string());
                                j += 2;
                            }
                        }
                    } else if let TokenTree::Ident(id) = &tokens[j] {
                        path.push(id.to_string());
                        j += 1;
                    }
                    if path.is_empty() {
                        i += 1;
                        continue;
                    }
                    while is_path_sep(&tokens, j) {
                        match tokens.get(j + 2) {
                            Some(TokenTree::Ident(id)) => {
                                path.push(id.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    self.add_path(path);
                    i = j.max(i + 1);
                }
                TokenTree::Literal(_) => i += 1,
            }
        }
    }
}

fn is_punct(tokens: &[TokenTree], i: usize, c: char) -> bool {
    matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c)
}

fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && is_punct(tokens, i + 1, ':')
}

impl<'ast> Visit<'ast> for PathReader<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if item.leading_colon.is_some() {
            // `use ::name`: always another crate.
            return;
        }
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        self.add_use(&mut prefix, &item.tree, public);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // Modules inside function bodies are rare; their paths count as
        // their function's module's (test modules still left out).
        if !is_cfg_test(&item.attrs) {
            visit::visit_item_mod(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.add_path(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.add_token_paths(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &attr.meta {
            // Every attribute's tokens, as a macro's: the parser leaves
            // them unread, and `#[command(version = crate::x::V)]` uses x.
            self.add_token_paths(list.tokens.clone());
            // serde also names functions in strings: `default = "crate::x::f"`.
            if list.path.is_ident("serde") {
                for token in list.tokens.clone() {
                    if let TokenTree::Literal(lit) = token {
                        let text = lit.to_string();
                        let inner = text.trim_matches('"');
                        if let Ok(path) = syn::parse_str::<syn::Path>(inner) {
                            self.add_path(
                                path.segments.iter().map(|s| s.ident.to_string()).collect(),
                            );
                        }
                    }
                }
            }
        }
        visit::visit_attribute(self, attr);
    }
}
