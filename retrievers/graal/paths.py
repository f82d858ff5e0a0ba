"""Paths between claim entities (GRAAL's Algorithm 2), as pure functions over loaded edges."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from retrievers.graal.graph_store import Edge


@dataclass(frozen=True)
class Subgraph:
    """The part of the corpus graph that connects the claim entities.

    Attributes:
        seeds: claim entities V1 (page numbers).
        between: between vertices V2 (on a path of bounded length between two distinct seeds).
        edges: kept edges, each with the seeds it connects.
        hubs: vertices that were not expanded (hub cap).
    """

    seeds: frozenset[int]
    between: frozenset[int]
    edges: tuple[tuple[Edge, frozenset[int]], ...]
    hubs: frozenset[int]


def load_neighbourhood(
    seeds: Iterable[int],
    incident: Callable[[int], list[Edge]],
    max_len: int,
    expandable: Callable[[int], bool],
) -> list[Edge]:
    """Edges incident to every vertex within ``ceil(max_len / 2) - 1`` hops of a seed.

    Any path of length <= ``max_len`` between two seeds has each edge incident to a
    vertex within that radius of one of its ends, so these edges contain all such paths.
    """
    radius = (max_len + 1) // 2
    seen: dict[int, int] = {}
    edges: dict[Edge, None] = {}
    queue = deque((s, 0) for s in sorted(set(seeds)))
    while queue:
        v, d = queue.popleft()
        if v in seen or not expandable(v):
            continue
        seen[v] = d
        for e in incident(v):
            edges[e] = None
            if d + 1 < radius:
                queue.append((e.v if e.u == v else e.u, d + 1))
    return list(edges)


def _distances(source: int, adj: dict[int, set[int]], limit: int) -> dict[int, int]:
    dist = {source: 0}
    queue = deque([source])
    while queue:
        v = queue.popleft()
        if dist[v] >= limit:
            continue
        for w in adj.get(v, ()):
            if w not in dist:
                dist[w] = dist[v] + 1
                queue.append(w)
    return dist


def connect(
    seeds: Iterable[int], edges: Iterable[Edge], max_len: int, blocked: Iterable[int] = ()
) -> Subgraph:
    """Between vertices and the edges on paths of length <= ``max_len`` between distinct seeds.

    Args:
        seeds: claim entities.
        edges: loaded edges (see ``load_neighbourhood``).
        max_len: path length bound (GRAAL: 2).
        blocked: vertices that may not lie inside a path (hubs); seeds are never blocked.
    """
    seeds = frozenset(seeds)
    blocked = frozenset(blocked) - seeds
    edges = [e for e in edges if e.u not in blocked and e.v not in blocked]
    adj: dict[int, set[int]] = {}
    for e in edges:
        adj.setdefault(e.u, set()).add(e.v)
        adj.setdefault(e.v, set()).add(e.u)
    dist = {s: _distances(s, adj, max_len) for s in sorted(seeds)}
    kept = []
    between: set[int] = set()
    for e in edges:
        pair_seeds: set[int] = set()
        for a, b in ((e.u, e.v), (e.v, e.u)):
            for s, ds in dist.items():
                if a not in ds:
                    continue
                for t, dt in dist.items():
                    if t != s and b in dt and ds[a] + 1 + dt[b] <= max_len:
                        pair_seeds.update((s, t))
        if pair_seeds:
            kept.append((e, frozenset(pair_seeds)))
            between.update(x for x in (e.u, e.v) if x not in seeds)
    return Subgraph(seeds, frozenset(between), tuple(kept), blocked)
