#!/usr/bin/env python3
"""Fails when two source files of one crate import each other, directly or through others.

Between crates Cargo forbids a cycle; inside a crate nothing does, so this reads every
`crate::`, `super::` and `self::` path of each crate's files (in `use` lines and in code),
resolves it to the module file it names, and reports each group of files that reach each other.
A module's `mod` declarations and its re-exports of its own descendants' items are the module
tree, not imports, and are not counted; any other `use` is, and a path to a re-exported name
counts as an import of the module the path names and of the one that defines the name.

Usage: .ci/import-circles.py [--graph]   (--graph also prints every file's imports)
"""

import re
import sys
from pathlib import Path

CRATES = ["crates/capfs/src", "crates/capfs-wire/src", "src"]
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")


def modules(src):
    """Module path (a tuple of names) -> file, for every .rs file under `src`."""
    found = {}
    for file in src.rglob("*.rs"):
        parts = list(file.relative_to(src).with_suffix("").parts)
        if parts in (["lib"], ["main"]):
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        found[tuple(parts)] = file
    return found


def strip_comments(text):
    """`text` without comments and without its inline `#[cfg(test)]` modules (tests are not
    part of the graph, and a `super` inside them names the file's own module)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    while (m := re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)) is not None:
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]
    return text


USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)


def expand(body):
    """`a::{b, c::{d}}` as the paths `a::b` and `a::c::d`."""
    paths = []
    stack = [(body.replace("\n", " "), "")]
    while stack:
        body, prefix = stack.pop()
        body = body.strip()
        brace = body.find("{")
        if brace < 0:
            paths.append(prefix + body.split(" as ")[0].strip())
            continue
        head, inner = body[:brace], body[brace + 1 : body.rfind("}")]
        depth, start = 0, 0
        for i, ch in enumerate(inner + ","):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                part = inner[start:i].strip()
                if part:
                    stack.append((part, prefix + head))
                start = i + 1
    return paths


def uses(text, public):
    """The `use` paths of `text`: only re-exports (`pub use`) or only the others."""
    paths = []
    for m in USE.finditer(text):
        if bool(m.group(1)) == public:
            paths += expand(m.group(2))
    return paths


def resolve(mods, module, path):
    """The module file `path` (seen from `module`) names, and the item after it, if any."""
    parts = [p for p in path.split("::") if p and p != "{"]
    if parts and parts[0] not in ("crate", "super", "self"):
        # A `use` path may start at a child module of this one (`use child::Item`).
        if tuple(module) + (parts[0],) not in mods:
            return None, None
        parts = ["self"] + parts
    if not parts:
        return None, None
    if parts[0] == "crate":
        base, rest = [], parts[1:]
    else:
        base, rest = list(module), parts
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    for n in range(len(rest), -1, -1):
        key = tuple(base + rest[:n])
        if key in mods:
            return key, (rest[n] if n < len(rest) else None)
    return None, None


def reexports(mods):
    """Module -> {name it re-exports: the module that name comes from}."""
    out = {}
    for module, file in mods.items():
        table = {}
        for path in uses(strip_comments(file.read_text()), public=True):
            name = path.split("::")[-1].strip()
            if name in ("*", "self"):
                continue
            target, _ = resolve(mods, module, path)
            if target is not None:
                table[name] = target
        out[module] = table
    return out


def imports(mods, exported, module, file):
    text = strip_comments(file.read_text())
    # Paths in code, outside `use` lines (a re-export's own path is not an import).
    code = USE.sub("", text)
    candidates = uses(text, public=False) + [m.group(0) for m in PATH.finditer(code)]
    for path in uses(text, public=True):
        target, _ = resolve(mods, module, path)
        if target is not None and target[: len(module)] != tuple(module):
            candidates.append(path)
    found = set()
    for path in candidates:
        target, item = resolve(mods, module, path)
        # A name a module re-exports is taken both from that module (the file the path names)
        # and from where it is defined.
        for _ in range(8):
            if target is None:
                break
            if mods[target] != file:
                found.add(mods[target])
            if item not in exported.get(target, {}):
                break
            target, item = exported[target][item], None
    return found


def circles(graph):
    """Groups of more than one file that reach each other (Tarjan's components)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    root = Path(__file__).resolve().parent.parent
    failed = False
    for crate in CRATES:
        src = root / crate
        mods = modules(src)
        exported = reexports(mods)
        graph = {f: imports(mods, exported, m, f) for m, f in mods.items()}
        if "--graph" in sys.argv:
            for f in sorted(graph):
                names = ", ".join(str(t.relative_to(root)) for t in sorted(graph[f]))
                print(f"{f.relative_to(root)} -> {names}")
        found = circles(graph)
        edges = sum(len(t) for t in graph.values())
        print(f"{crate}: {len(graph)} files, {edges} imports, {len(found)} circles")
        for group in found:
            failed = True
            print("  circle: " + " <-> ".join(str(f.relative_to(root)) for f in group))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
