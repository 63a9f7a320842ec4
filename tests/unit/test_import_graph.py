"""No import circle among tuimon's modules, type-only imports included (issue 38): each layer
imports only the layers below it (`lint-imports`), and within a layer two modules never import
each other, not even under `TYPE_CHECKING` (a `Protocol` or a message says what one needs)."""

from __future__ import annotations

import grimp


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The modules that import each other, round and round (strongly connected, more than
    one module), each circle sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in order:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:  # Tarjan's algorithm, without recursion
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in order:
                    order[nxt] = low[nxt] = len(order)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    circle = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        circle.append(member)
                        if member == node:
                            break
                    if len(circle) > 1:
                        circles.append(sorted(circle))
    return circles


def test_no_import_circle_type_only_imports_included() -> None:
    graph = grimp.build_graph("tuimon", exclude_type_checking_imports=False, cache_dir=None)
    circles = _circles(graph)
    assert not circles, "modules that import each other: " + "; ".join(
        " <-> ".join(circle) for circle in circles
    )


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.c", imported="p.d")
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]
