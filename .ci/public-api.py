#!/usr/bin/env python3
"""Prints the public API of a library crate of the workspace, one sorted line per item.

    .ci/public-api.py capfs          # or capfs-wire

It builds the crate's rustdoc JSON on nightly (hidden items included: they are public too) and
walks it from the crate root through public modules and re-exports. Each line is a kind and a
path (`struct capfs::WriteOptions`, `fn capfs::Sandbox::with_root`, `field
capfs::WriteOptions::mode`); structs, enums and variants that callers cannot build or match
exhaustively say `#[non_exhaustive]`, hidden items `#[doc(hidden)]`. Trait implementations are
listed as `impl Trait for Type`, except the ones the compiler derives on its own (auto traits)
and blanket ones.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(package):
    subprocess.run(
        ["cargo", "+nightly", "rustdoc", "-q", "-p", package, "--lib", "--",
         "-Z", "unstable-options", "--output-format", "json", "--document-hidden-items"],
        cwd=ROOT, check=True, env=dict(os.environ, CARGO_INCREMENTAL="0"))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    with open(os.path.join(target, "doc", package.replace("-", "_") + ".json")) as f:
        return json.load(f)


def kind_of(item):
    return next(iter(item["inner"]))


def marks(item):
    out = []
    for attr in item.get("attrs", []):
        text = attr if isinstance(attr, str) else json.dumps(attr)
        if "non_exhaustive" in text:
            out.append("#[non_exhaustive]")
        if "doc(hidden)" in text.replace(" ", ""):
            out.append("#[doc(hidden)]")
    return (" " + " ".join(sorted(set(out)))) if out else ""


def type_name(ty):
    if ty is None:
        return "?"
    if "resolved_path" in ty:
        return ty["resolved_path"]["path"].split("::")[-1]
    if "borrowed_ref" in ty:
        return "&" + type_name(ty["borrowed_ref"]["type"])
    if "generic" in ty:
        return ty["generic"]
    if "primitive" in ty:
        return ty["primitive"]
    return next(iter(ty))


class Walker:
    def __init__(self, doc):
        self.doc = doc
        self.index = doc["index"]
        self.lines = set()
        self.seen = set()

    def item(self, item_id):
        return self.index.get(str(item_id))

    def emit(self, kind, path, item=None):
        self.lines.add(f"{kind} {path}{marks(item) if item else ''}")

    def module(self, item_id, path):
        if (item_id, path) in self.seen:
            return
        self.seen.add((item_id, path))
        for child_id in self.item(item_id)["inner"]["module"]["items"]:
            child = self.item(child_id)
            if child is None or child["visibility"] != "public":
                continue
            if kind_of(child) == "use":
                self.reexport(child, path)
            else:
                self.named(child_id, child, f"{path}::{child['name']}")

    def reexport(self, use_item, path):
        use = use_item["inner"]["use"]
        target = self.item(use["id"]) if use["id"] is not None else None
        if use["is_glob"]:
            if target is not None and kind_of(target) == "module":
                self.module(use["id"], path)
            else:
                self.emit("use", f"{path}::{use['source']}::*", use_item)
            return
        if target is None:
            self.emit("use", f"{path}::{use['name']} = {use['source']}", use_item)
            return
        hidden = marks(use_item)
        self.named(use["id"], target, f"{path}::{use['name']}")
        if hidden:
            # A hidden re-export hides what it names.
            for line in list(self.lines):
                head = line.split(" ")
                if head[1] == f"{path}::{use['name']}":
                    self.lines.discard(line)
                    self.lines.add(f"{line} {hidden.strip()}")

    def named(self, item_id, item, path):
        kind = kind_of(item)
        if kind == "module":
            self.emit("mod", path, item)
            self.module(item_id, path)
        elif kind == "struct":
            self.emit("struct", path, item)
            self.fields(item["inner"]["struct"]["kind"], path)
            self.impls(item["inner"]["struct"]["impls"], path)
        elif kind == "enum":
            self.emit("enum", path, item)
            for variant_id in item["inner"]["enum"]["variants"]:
                variant = self.item(variant_id)
                vpath = f"{path}::{variant['name']}"
                self.emit("variant", vpath, variant)
                self.fields(variant["inner"]["variant"]["kind"], vpath)
            self.impls(item["inner"]["enum"]["impls"], path)
        elif kind == "trait":
            self.emit("trait", path, item)
            for member_id in item["inner"]["trait"]["items"]:
                member = self.item(member_id)
                self.member(member, f"{path}::{member['name']}")
        elif kind == "function":
            self.emit("fn", path, item)
        elif kind == "constant":
            self.emit("const", path, item)
        elif kind == "static":
            self.emit("static", path, item)
        elif kind == "type_alias":
            self.emit("type", path, item)
        elif kind == "macro":
            self.emit("macro", path, item)
        else:
            self.emit(kind, path, item)

    def fields(self, shape, path):
        if not isinstance(shape, dict):
            return
        if "plain" in shape:
            ids = shape["plain"]["fields"]
        elif "struct" in shape:
            ids = shape["struct"]["fields"]
        else:
            ids = shape.get("tuple", [])
        for position, field_id in enumerate(ids):
            field = self.item(field_id) if field_id is not None else None
            if field is None or field["visibility"] not in ("public", "default"):
                continue
            name = field["name"] if not field["name"].isdigit() else str(position)
            self.emit("field", f"{path}::{name}", field)

    def member(self, member, path):
        kind = kind_of(member)
        label = {"function": "fn", "assoc_const": "const", "assoc_type": "type"}.get(kind, kind)
        self.emit(label, path, member)

    def impls(self, impl_ids, path):
        for impl_id in impl_ids:
            inner = self.item(impl_id)["inner"]["impl"]
            if inner["is_synthetic"] or inner["blanket_impl"] is not None:
                continue
            if inner["trait"] is None:
                for member_id in inner["items"]:
                    member = self.item(member_id)
                    if member["visibility"] == "public":
                        self.member(member, f"{path}::{member['name']}")
            else:
                trait = inner["trait"]["path"].split("::")[-1]
                args = (inner["trait"].get("args") or {}).get("angle_bracketed", {}).get("args", [])
                named = [type_name(a["type"]) for a in args if "type" in a]
                if named:
                    trait += "<" + ", ".join(named) + ">"
                generic = "!" if inner["is_negative"] else ""
                self.lines.add(f"impl {generic}{trait} for {path}")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("capfs", "capfs-wire"):
        sys.exit("usage: .ci/public-api.py capfs|capfs-wire")
    package = sys.argv[1]
    doc = build(package)
    walker = Walker(doc)
    walker.module(doc["root"], package.replace("-", "_"))
    for line in sorted(walker.lines):
        print(line)


if __name__ == "__main__":
    main()
