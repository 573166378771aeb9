#!/usr/bin/env python3
"""Checks the layering of the host crates (CI runs it):

1. orkestra-katalog and the expression language under it (orkestra-expr) stay pure: none of
   kube, wasmtime, tokio, an HTTP stack or axum in their dependency trees (normal and dev),
   so they build, test and fuzz without them.
2. orkestra-gateway links no Wasm engine (it shares the Katalog's effects, not the runtime).
3. No import cycles between the top-level modules of each host crate, counting a name the
   crate root re-exports (`crate::CrdEntry`) as a use of the module that defines it. A
   module's own files may refer to each other (a reconciler split into impl blocks); test
   code is left out.
4. No source file of a host crate over 600 lines (test files and test modules apart): a
   file that grows past it holds more than one stage, and is split where its parts meet.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FORBIDDEN = ("kube", "kube-client", "kube-runtime", "wasmtime", "tokio", "reqwest", "hyper", "axum")


def dependencies(package, edges):
    tree = subprocess.run(
        ["cargo", "tree", "-p", package, "-e", edges, "--prefix", "none", "--locked"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return {line.split()[0] for line in tree.splitlines() if line.strip()}


def impure_dependencies(package):
    return sorted(n for n in dependencies(package, "normal,dev") if n in FORBIDDEN)


def root_exports(src_dir):
    """What the crate root re-exports, so `crate::Name` counts as a use of the module that
    defines it: `pub use m::{A, B}` maps each name to `m`; `pub use m::*` catches the rest."""
    named, glob = {}, None
    for root in ("lib.rs", "main.rs"):
        path = os.path.join(src_dir, root)
        if not os.path.exists(path):
            continue
        for module, items in re.findall(r"^pub use ([a-z_][a-z0-9_]*)::(.+);", open(path, encoding="utf-8").read(), re.M):
            items = items.strip()
            if items == "*":
                glob = module
                continue
            for item in items.strip("{}").split(","):
                name = item.strip().split("::")[-1].split(" as ")[-1].strip()
                if name:
                    named[name] = module
    return named, glob


def module_edges(src_dir):
    named, glob = root_exports(src_dir)
    edges = {}
    for folder, _, files in os.walk(src_dir):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src_dir)
            if rel in ("lib.rs", "main.rs"):
                continue
            # Test modules (`tests.rs`, `*_tests.rs`, `tests/`) may use anything.
            if name == "tests.rs" or name.endswith("_tests.rs") or "tests" in rel.split(os.sep)[:-1]:
                continue
            top = rel.split(os.sep)[0].removesuffix(".rs")
            code = re.sub(r"//.*", "", open(path, encoding="utf-8").read())
            code = code.split("#[cfg(test)]")[0]
            if os.sep not in rel:
                # In a top-level file, `super::` is the crate root.
                code = code.replace("super::", "crate::")
            used = set(re.findall(r"\bcrate::([A-Za-z_][A-Za-z0-9_]*)", code))
            for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
                used |= {item.strip().split("::")[0] for item in group.split(",")}
            modules = set()
            for item in used:
                if item in named:
                    modules.add(named[item])
                elif item[:1].islower():
                    modules.add(item)
                elif item[:1].isupper() and glob:
                    modules.add(glob)
            edges[top] = edges.get(top, set()) | {m for m in modules if m != top}
    return edges


MAX_LINES = 600


def long_files(src_dir):
    """Source files over MAX_LINES lines, test files (`tests.rs`, `*_tests.rs`, `tests/`)
    apart."""
    found = []
    for folder, _, files in os.walk(src_dir):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), src_dir)
            if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                continue
            if "tests" in rel.split(os.sep)[:-1]:
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as source:
                lines = sum(1 for _ in source)
            if lines > MAX_LINES:
                found.append((rel, lines))
    return sorted(found)


def cycles(edges):
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for next_node in edges.get(node, ()):
            if next_node not in index:
                visit(next_node)
                low[node] = min(low[node], low[next_node])
            elif next_node in on_stack:
                low[node] = min(low[node], index[next_node])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main():
    failed = False
    for package in ("orkestra-expr", "orkestra-katalog"):
        impure = impure_dependencies(package)
        if impure:
            print(f"{package} must stay pure, but depends on: {', '.join(impure)}")
            failed = True
    engines = sorted(n for n in dependencies("orkestra-gateway", "normal") if n in ("wasmtime", "orkestra-wasm"))
    if engines:
        print(f"orkestra-gateway must not link a Wasm engine, but depends on: {', '.join(engines)}")
        failed = True
    crates = ("expr", "katalog", "kube", "net", "effects", "control-plane", "wasm", "runtime", "gateway", "control-center", "cli")
    for crate in crates:
        src = os.path.join(ROOT, "host", crate, "src")
        for cycle in cycles(module_edges(src)):
            print(f"host/{crate}: import cycle between modules {' -> '.join(cycle)}")
            failed = True
        for rel, lines in long_files(src):
            print(f"host/{crate}/src/{rel}: {lines} lines, over {MAX_LINES}: split it where its parts meet")
            failed = True
    if not failed:
        print(
            "layers: orkestra-expr and orkestra-katalog are pure; the gateway links no Wasm engine; no import cycles "
            f"between modules; no source file over {MAX_LINES} lines"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
