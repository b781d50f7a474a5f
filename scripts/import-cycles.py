#!/usr/bin/env python3
"""Prints the import cycles between the files of each of the repository's Rust crates, read
from the code's own imports.

    python3 scripts/import-cycles.py [--tests] [--edges] [SRC_DIR]

The crates read: the library (`src/lib.rs`), the command line's library and binary
(`cli/src/lib.rs`, `cli/src/main.rs`) and each program of `tools/src/bin/`. With SRC_DIR, only
the crate rooted at `SRC_DIR/lib.rs`.

A file A depends on a file B when A names an item that B defines: through a `use` (`use
crate::…`, `use super::…`, `use self::…`, groups and renames expanded) or a path written in the
code (`crate::store::table_path(…)`, `super::simd::prefetch(…)`). A name is followed through
the re-exports (`pub use`, `use`) of the modules on its path to the file that defines it, so
`crate::store::Lifetime` depends on wherever `Lifetime` is defined, not on `store/mod.rs`.

One kind of arrow is not counted: a file's use of its own ancestors (`store/worker.rs` of
`store/mod.rs`, any file of `lib.rs`). A module spread over files by job (one `impl Store`
over `store/*.rs`) shares its parent's private state that way; Rust's privacy makes the
parent the place for it. Every other arrow counts, test modules' arrows only with `--tests`.
`mod` declarations are not imports. Arrows between crates (the binary's `filterstore::…`,
`filterstore_cli::…`) are not followed: cargo forbids circles between crates.

Prints each cycle (a strongly connected set of two or more files) with the arrows inside it
and where each was written, then the number of cycles; exits 1 when there is one.
"""

import os
import re
import sys


def strip_comments_and_literals(text):
    """The code with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "rb" and re.match(r'(br|r)#*"', text[i:i + 80]) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r'(br|r)(#*)"', text[i:])
            close = '"' + m.group(2)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if nxt == "\\":
                j = text.find("'", i + 2)
                j = n if j < 0 else j + 1
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:
                out.append(c)
                i += 1
                continue
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_top(s):
    """`a, b::{c, d}` split at the commas outside braces."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree):
    """A use tree as (path segments, name bound) pairs; a glob binds '*'."""
    tree = tree.strip()
    m = re.match(r"^(.*?)(?:::)?\s*\{(.*)\}$", tree, re.S)
    if m:
        prefix = [s.strip() for s in m.group(1).split("::") if s.strip()]
        out = []
        for part in split_top(m.group(2)):
            for segs, name in expand_use(part):
                if segs == ["self"]:
                    out.append((prefix, prefix[-1] if prefix else name))
                else:
                    out.append((prefix + segs, name))
        return out
    m = re.match(r"^(.*?)\s+as\s+(\w+)$", tree, re.S)
    alias = None
    if m:
        tree, alias = m.group(1), m.group(2)
    segs = [s.strip() for s in tree.split("::") if s.strip()]
    return [(segs, alias or (segs[-1] if segs else ""))]


class Crate:
    def __init__(self, src, with_tests, root="lib.rs"):
        self.src = src
        self.root = root
        self.with_tests = with_tests
        self.files = {}  # file -> module path (tuple)
        self.modules = {}  # module path -> file (file modules and inline modules)
        self.imports = {}  # module path -> {name: absolute path list}
        self.globs = {}  # module path -> [absolute module path]
        self.refs = []  # (file, line, context module, absolute path, how)
        self._discover(root, ())

    def _file_of_child(self, file, name):
        d = os.path.dirname(file)
        base = os.path.basename(file)
        if file == self.root or base in ("lib.rs", "main.rs", "mod.rs"):
            cands = [os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")]
        else:
            stem = base[:-3]
            cands = [os.path.join(d, stem, name + ".rs"), os.path.join(d, stem, name, "mod.rs")]
        for c in cands:
            if os.path.exists(os.path.join(self.src, c)):
                return c
        return None

    def _discover(self, file, modpath):
        self.files[file] = modpath
        self.modules[modpath] = file
        with open(os.path.join(self.src, file), encoding="utf-8") as f:
            raw = f.read()
        code = strip_comments_and_literals(raw)
        # Inline module spans, and child files declared with `mod name;`.
        spans = []  # (start, end, path)
        stack = []  # (path, depth at open, is_test)
        depth = 0
        mod_open = re.compile(r"\bmod\s+(\w+)\s*\{")
        mod_decl = re.compile(r"\bmod\s+(\w+)\s*;")
        test_attr = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?$")
        opens = {m.end() - 1: m for m in mod_open.finditer(code)}
        skip = []  # test spans when tests are not read
        cur_start = 0
        for i, ch in enumerate(code):
            if ch == "{":
                if i in opens:
                    m = opens[i]
                    parent = stack[-1][0] if stack else modpath
                    is_test = bool(test_attr.search(code[max(0, m.start() - 80):m.start()]))
                    path = parent + (m.group(1),)
                    stack.append((path, depth, is_test, i))
                    self.modules[path] = file
                depth += 1
            elif ch == "}":
                depth -= 1
                if stack and stack[-1][1] == depth:
                    path, _, is_test, start = stack.pop()
                    spans.append((start, i, path))
                    if is_test or any(s[2] for s in stack):
                        skip.append((start, i))
        for m in mod_decl.finditer(code):
            if test_attr.search(code[max(0, m.start() - 80):m.start()]):
                continue
            child = self._file_of_child(file, m.group(1))
            if child:
                self._discover(child, modpath + (m.group(1),))

        def context(pos):
            best = modpath
            for s, e, p in spans:
                if s <= pos <= e and len(p) > len(best):
                    best = p
            return best

        def skipped(pos):
            return not self.with_tests and any(s <= pos <= e for s, e in skip)

        def line(pos):
            return code.count("\n", 0, pos) + 1

        use_spans = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            use_spans.append((m.start(), m.end()))
            ctx = context(m.start())
            for segs, name in expand_use(m.group(1)):
                absolute = self._absolute(segs, ctx)
                if absolute is None:
                    continue
                if name == "*":
                    self.globs.setdefault(ctx, []).append(absolute[:-1])
                else:
                    self.imports.setdefault(ctx, {})[name] = absolute
                if not skipped(m.start()):
                    target = absolute[:-1] if absolute and absolute[-1] == "*" else absolute
                    self.refs.append((file, line(m.start()), ctx, target, "use " + "::".join(segs)))
        for m in re.finditer(r"(?<![\w:$])(crate|super|self)((?:\s*::\s*\w+)+)", code):
            if any(s <= m.start() < e for s, e in use_spans) or skipped(m.start()):
                continue
            segs = [m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()]
            ctx = context(m.start())
            absolute = self._absolute(segs, ctx)
            if absolute is not None:
                self.refs.append((file, line(m.start()), ctx, absolute, "::".join(segs)))

    def _absolute(self, segs, ctx):
        """The path from the crate root, or None for another crate's."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return list(segs[1:])
        if head in ("super", "self"):
            base = list(ctx)
            i = 0
            while i < len(segs) and segs[i] in ("super", "self"):
                if segs[i] == "super":
                    base = base[:-1]
                i += 1
            return base + list(segs[i:])
        # A path relative to the module (a child module's name), else another crate's.
        if tuple(ctx) + (head,) in self.modules:
            return list(ctx) + list(segs)
        return None

    def resolve(self, path, seen=0):
        """The file defining what `path` (from the crate root) names."""
        path = list(path)
        k = len(path)
        while k > 0 and tuple(path[:k]) not in self.modules:
            k -= 1
        mod = tuple(path[:k])
        rest = path[k:]
        if rest and seen < 20:
            target = self.imports.get(mod, {}).get(rest[0])
            if target is not None and target != path[: k + 1]:
                return self.resolve(target + rest[1:], seen + 1)
        return self.modules[mod]


def tarjan(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycles_of(crate):
    """The crate's cycles (sorted lists of files), its arrows, and where each was written."""
    edges, where = {}, {}
    for file, line, _ctx, path, how in crate.refs:
        target = crate.resolve(path)
        tmod = crate.files[target]
        smod = crate.files[file]
        if target == file or smod[: len(tmod)] == tmod:
            continue  # itself, or one of its ancestors
        edges.setdefault(file, set()).add(target)
        where.setdefault((file, target), f"{file}:{line} {how}")
    cycles = [c for c in tarjan(crate.files, edges) if len(c) > 1]
    return cycles, edges, where


def crate_roots(top):
    """(label, source dir, root file) of each crate of the repository."""
    roots = [("filterstore", os.path.join(top, "src"), "lib.rs")]
    cli = os.path.join(top, "cli", "src")
    for root, label in (("lib.rs", "filterstore-cli (lib)"), ("main.rs", "store (bin)")):
        if os.path.exists(os.path.join(cli, root)):
            roots.append((label, cli, root))
    bins = os.path.join(top, "tools", "src", "bin")
    if os.path.isdir(bins):
        for name in sorted(os.listdir(bins)):
            if name.endswith(".rs"):
                roots.append((f"tools: {name[:-3]}", bins, name))
    return roots


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    roots = [(args[0], args[0], "lib.rs")] if args else crate_roots(top)
    total = 0
    for label, src, root in roots:
        crate = Crate(src, "--tests" in flags, root)
        cycles, edges, where = cycles_of(crate)
        arrows = sum(len(v) for v in edges.values())
        rel = os.path.relpath(src, top) if not args else src
        if len(crate.files) > 1 or cycles:
            print(f"{label} ({rel}): {len(crate.files)} files, {arrows} arrows between them")
        for c in sorted(cycles, key=lambda c: (-len(c), c)):
            print(f"cycle of {len(c)} files: {', '.join(c)}")
            if "--edges" in flags:
                for a in c:
                    for b in sorted(edges.get(a, ())):
                        if b in c:
                            print(f"  {a} -> {b}   ({where[(a, b)]})")
        total += len(cycles)
    print(f"{total} import cycles")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
