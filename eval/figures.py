"""PNG figures of a comparison run (matplotlib, Agg backend; no display needed).

Each function takes plain data (the ``metrics.json`` dict, a config, a subgraph
dict) and a path, draws one figure and returns the path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

from garag.artifacts import write_file_atomic  # noqa: E402
from garag.config import Config  # noqa: E402

logger = logging.getLogger(__name__)

DPI = 130
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
ROLE_COLORS = {"claim": "#4c72b0", "claim-entity": "#4c72b0", "between": "#dd8452"}


def _save(fig: plt.Figure, path: Path) -> Path:
    try:
        write_file_atomic(path, lambda tmp: fig.savefig(tmp, dpi=DPI, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return path


def comparison_bars(metrics: Mapping, path: Path) -> Path:
    """Grouped bars per metric and system; accuracy, FEVER score and macro-F1 (where the run has its
    interval) carry 95% bootstrap intervals."""
    names = metrics["systems"]
    keys = [
        ("label_accuracy", "accuracy", "accuracy"),
        ("fever_score", "FEVER score", "fever_score"),
        ("macro_f1", "macro-F1", "macro_f1"),
        ("evidence_f1", "evidence F1", None),
        ("recall@5", "recall@5", None),
        ("recall@20", "recall@20", None),
    ]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.4 * len(keys) * len(names) / 2 + 3), 4.2))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        m = metrics["per_system"][name]
        values, lows, highs = [], [], []
        for key, _, ci in keys:
            v = m["retrieval"].get(key) if key.startswith("recall@") else m[key]
            v = float(v or 0.0)
            values.append(v)
            interval = m.get("macro_f1_ci") if ci == "macro_f1" else m["ci"][ci] if ci else None
            lo, hi = (interval[1], interval[2]) if interval else (v, v)
            lows.append(max(0.0, v - lo))
            highs.append(max(0.0, hi - v))
        xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(keys))]
        ax.bar(xs, values, width, label=name, color=_COLORS[j % len(_COLORS)])
        ci = [i for i, k in enumerate(keys) if k[2]]
        ax.errorbar(
            [xs[i] for i in ci], [values[i] for i in ci],
            yerr=[[lows[i] for i in ci], [highs[i] for i in ci]],
            fmt="none", ecolor="black", capsize=3, lw=1,
        )  # fmt: skip
        for x, v, up in zip(xs, values, highs, strict=True):  # above the bar and its interval
            ax.text(x, v + up + 0.012, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(keys)), [k[1] for k in keys])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("score")
    ax.set_title(f"{metrics['dataset']}: {metrics['n_scored']} claims (error bars: 95% bootstrap CI)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def confusion_matrices(metrics: Mapping, path: Path) -> Path:
    """One confusion matrix (rows gold, columns predicted) per system."""
    names = metrics["systems"]
    fig, axes = plt.subplots(
        1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False, layout="constrained"
    )
    for k, (ax, name) in enumerate(zip(axes[0], names, strict=True)):
        conf = metrics["per_system"][name]["confusion"]
        labels, matrix = conf["labels"], conf["matrix"]
        ax.imshow(matrix, cmap="Blues")
        top = max(max(row) for row in matrix) or 1
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, str(v), ha="center", va="center", color="white" if v > top / 2 else "black")
        short = [lab.replace("NOT ENOUGH INFO", "NEI").replace("NOT_SUPPORTED", "NOT SUP.") for lab in labels]
        ax.set_xticks(range(len(labels)), short, fontsize=8)
        ax.set_yticks(range(len(labels)), short, fontsize=8)
        ax.set_xlabel("predicted")
        if k == 0:
            ax.set_ylabel("gold")
        ax.set_title(name, fontsize=10)
    return _save(fig, path)


def hit_rate_scatter(metrics: Mapping, path: Path) -> Path:
    """GRAAL-style: hit rate against mean number of retrieved sentences, one line per retriever."""
    names = metrics["systems"]
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.8), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names, strict=True):
        curves = metrics["per_system"][name].get("hit_rate_curve", {})
        for i, (retriever, points) in enumerate(sorted(curves.items())):
            xs = [p["avg_sentences"] for p in points]
            ys = [p["hit_rate"] for p in points]
            style = "-" if retriever == "fused" else "--"
            ax.plot(xs, ys, style, marker="o", ms=3, label=retriever, color=_COLORS[i % len(_COLORS)])
        ax.set_xscale("log")
        ax.set_xlabel("sentences retrieved per claim (log)")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("hit rate (whole gold set retrieved)")
    axes[0][0].set_ylim(0, 1.02)
    return _save(fig, path)


def latency_breakdown(metrics: Mapping, path: Path) -> Path:
    """Stacked horizontal bars: mean seconds per claim in each stage, per system."""
    names = metrics["systems"]
    stages = sorted({s for n in names for s in metrics["per_system"][n]["cost"]["stages"]})
    fig, ax = plt.subplots(figsize=(8, 1.1 + 0.7 * len(names)))
    left = [0.0] * len(names)
    longest = (
        max(sum(s["mean"] for s in metrics["per_system"][n]["cost"]["stages"].values()) * 1000 for n in names)
        or 1.0
    )
    for i, stage in enumerate(stages):
        widths = [
            metrics["per_system"][n]["cost"]["stages"].get(stage, {}).get("mean", 0.0) * 1000 for n in names
        ]
        ax.barh(names, widths, left=left, label=stage, color=_COLORS[i % len(_COLORS)])
        for y, (x0, w) in enumerate(zip(left, widths, strict=True)):
            if w > 0.06 * longest:  # label only segments wide enough to hold it
                ax.text(x0 + w / 2, y, f"{w:.1f}", ha="center", va="center", fontsize=8, color="white")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("mean milliseconds per claim")
    ax.set_title("latency by stage")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.invert_yaxis()
    return _save(fig, path)


def evidence_graph(subgraph: Mapping, path: Path) -> Path:
    """Draw one claim's evidence subgraph.

    Args:
        subgraph: ``{"claim": str, "label": str (optional), "vertices": [{"id", "label"
            (optional), "role": "claim-entity" | "between"}], "edges": [{"source", "target",
            "sentence": [page, line], "text" (optional), "decisive": bool}]}``.
        path: PNG to write.

    Raises:
        ValueError: an edge names an unknown vertex, or a vertex has an unknown role.
    """
    import networkx as nx

    vertices = {v["id"]: v for v in subgraph.get("vertices", [])}
    for v in vertices.values():
        if v.get("role", "between") not in ROLE_COLORS:
            raise ValueError(f"vertex {v['id']!r}: unknown role {v.get('role')!r} (claim-entity or between)")
    graph = nx.Graph()
    graph.add_nodes_from(vertices)
    labels: dict[tuple[str, str], list[str]] = {}
    decisive: set[tuple[str, str]] = set()
    for e in subgraph.get("edges", []):
        s, t = e["source"], e["target"]
        if s not in vertices or t not in vertices:
            raise ValueError(f"edge {s!r} -> {t!r} names a vertex not in 'vertices'")
        key = (s, t) if (s, t) in labels or (t, s) not in labels else (t, s)
        page, line = e["sentence"]
        labels.setdefault(key, []).append(f"({page}, {line})")
        graph.add_edge(s, t)
        if e.get("decisive"):
            decisive.add(key)
    fig, ax = plt.subplots(figsize=(8, 6))
    pos = nx.spring_layout(graph, seed=0, k=1.6 / max(1, len(graph)) ** 0.5)
    plain = [e for e in graph.edges if e not in decisive and e[::-1] not in decisive]
    bold = [e for e in graph.edges if e in decisive or e[::-1] in decisive]
    nx.draw_networkx_edges(graph, pos, edgelist=plain, edge_color="#999999", width=1.2, ax=ax)
    nx.draw_networkx_edges(graph, pos, edgelist=bold, edge_color="#c44e52", width=3.0, ax=ax)
    colors = [ROLE_COLORS[vertices[n].get("role", "between")] for n in graph.nodes]
    nx.draw_networkx_nodes(graph, pos, node_color=colors, node_size=900, alpha=0.9, ax=ax)
    nx.draw_networkx_labels(
        graph,
        pos,
        {n: str(vertices[n].get("label", n)).replace("_", " ") for n in graph.nodes},
        font_size=8,
        ax=ax,
    )
    edge_text = {k: "\n".join(v[:3]) + ("\n..." if len(v) > 3 else "") for k, v in labels.items()}
    nx.draw_networkx_edge_labels(graph, pos, edge_text, font_size=7, ax=ax)
    handles = [
        plt.Line2D([], [], marker="o", ls="", color=ROLE_COLORS["claim-entity"], ms=10, label="claim entity"),
        plt.Line2D([], [], marker="o", ls="", color=ROLE_COLORS["between"], ms=10, label="between entity"),
        plt.Line2D([], [], color="#c44e52", lw=3, label="deciding evidence"),
        plt.Line2D([], [], color="#999999", lw=1.2, label="other evidence (page, line)"),
    ]
    ax.legend(handles=handles, loc="lower left", fontsize=8)
    if graph.number_of_edges() == 0:  # say so, rather than leave a blank canvas
        n = sum(1 for v in vertices.values() if v.get("role") in ("claim", "claim-entity"))
        ax.text(
            0.5, 0.5, f"no evidence edge: {n} claim entit{'y' if n == 1 else 'ies'} linked,\n"
            "no sentence connects two of them within 2 hops",
            ha="center", va="center", fontsize=10, color="#555555", transform=ax.transAxes,
        )  # fmt: skip
    title = subgraph.get("claim", "")
    if subgraph.get("label"):
        title += f"\n-> {subgraph['label']}"
    ax.set_title(title, fontsize=10, wrap=True)
    ax.margins(0.12)  # room for labels of nodes on the border
    ax.axis("off")
    return _save(fig, path)


def _box(ax: plt.Axes, x: float, y: float, text: str, color: str, w: float = 1.5, h: float = 0.5) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05", fc=color, ec="#333333", alpha=0.9
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=8)


def _arrow(ax: plt.Axes, x0: float, y0: float, x1: float, y1: float) -> None:
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=12, color="#333333"))


def pipeline_stages(cfg: Config) -> tuple[list[str], list[str], list[str]]:
    """The boxes of one system's row: stages before retrieval, retrievers, stages after fusion.

    Decomposition shows when it is configured; triplets and the fact graph only in graph mode;
    the verifier box names the NLI model (or the LLM with its NLI fallback)."""
    before = []
    if cfg.decomposition.method != "none" and cfg.pipeline.mode == "graph":
        before.append(f"decomposition\n({cfg.decomposition.method})\nsubquestions")
    after = [f"RRF fusion\nk={cfg.retrieval.k}"]
    if cfg.pipeline.mode == "graph":
        after.append(f"triplets\n({cfg.triplets.method})\ntop-{cfg.pipeline.evidence_pool}")
        after.append(f"fact graph\n({cfg.propagation.method})\nre-ranking")
    parts = Path(cfg.verifier.model).parts[-2:] if cfg.verifier.model else ("garag NLI", "(trained)")
    model = "\n".join(p if len(p) <= 20 else p[:17] + "..." for p in parts)
    if cfg.pipeline.verifier == "llm":
        llm = cfg.llm.model if len(cfg.llm.model) <= 20 else cfg.llm.model[:17] + "..."
        after.append(f"verifier: LLM\n{llm}\n(NLI fallback)")
    else:
        after.append(f"verifier\n{model}\n{cfg.verifier.mode}, top-{cfg.verifier.top_k}")
    after.append("verdict + evidence\n+ explanation")
    return before, list(cfg.retrieval.retrievers), after


def pipeline_diagram(configs: Mapping[str, Config], path: Path) -> Path:
    """One row per system: claim -> [decomposition] -> retrievers -> RRF fusion ->
    [triplets -> fact graph] -> verifier -> verdict."""
    rows = [(name, *pipeline_stages(cfg)) for name, cfg in configs.items()]
    step = 1.9
    width = max(1 + len(b) + 1 + len(a) for _, b, _, a in rows) * step + 1.0
    height = sum(max(1, len(r)) * 0.7 + 0.6 for _, _, r, _ in rows)
    fig, ax = plt.subplots(figsize=(max(10.0, width * 0.95), 0.6 + 0.9 * height))
    y_top = height
    colors = {"RRF": "#c9e3c0", "verifier": "#e3c9e8", "verdict": "#eeeeaa"}
    for name, before, retrievers, after in rows:
        n = max(1, len(retrievers))
        mid = y_top - (n * 0.7 + 0.6) / 2
        ax.text(-0.2, mid, name, ha="right", va="center", fontsize=10, weight="bold")
        x = 0.8
        _box(ax, x, mid, "claim", "#dddddd", w=1.0)
        right = x + 0.5
        for text in before:
            x += step
            _arrow(ax, right, mid, x - 0.8, mid)
            _box(ax, x, mid, text, "#f7e1a8", w=1.5, h=0.8)
            right = x + 0.75
        x += step
        ys = [mid + (n - 1) * 0.35 - i * 0.7 for i in range(n)]
        for r, y in zip(retrievers, ys, strict=True):
            _box(ax, x, y, r, "#f2c49b" if r == "graal" else "#a9c4e8")
            _arrow(ax, right, mid, x - 0.75, y)
        left_ends = [(x + 0.75, y) for y in ys]
        for text in after:
            x += step
            color = next((c for k, c in colors.items() if text.startswith(k)), "#f7e1a8")
            w, h = (1.6, 0.9) if text.count("\n") >= 2 else (1.6, 0.6)
            for ex, ey in left_ends:
                _arrow(ax, ex, ey, x - w / 2, mid)
            _box(ax, x, mid, text, color, w=w, h=h)
            left_ends = [(x + w / 2, mid)]
        y_top -= n * 0.7 + 0.6
    ax.set_xlim(-1.6, width)
    ax.set_ylim(-0.1, height + 0.1)
    ax.axis("off")
    ax.set_title("pipelines compared")
    return _save(fig, path)


def draw_all(run_dir: Path, metrics: Mapping, configs: Mapping[str, Config]) -> dict[str, str]:
    """Every figure of a run into ``run_dir/figures``; returns name -> path relative to ``run_dir``."""
    out = run_dir / "figures"
    made = {
        "comparison": comparison_bars(metrics, out / "comparison.png"),
        "confusion": confusion_matrices(metrics, out / "confusion.png"),
        "hit_rate": hit_rate_scatter(metrics, out / "hit_rate_vs_retrieved.png"),
        "latency": latency_breakdown(metrics, out / "latency.png"),
        "pipeline": pipeline_diagram(configs, out / "pipeline.png"),
    }
    for sub in sorted((run_dir / "subgraphs").glob("*/*.json")) if (run_dir / "subgraphs").is_dir() else []:
        try:
            data = json.loads(sub.read_text(encoding="utf-8"))
            decisive = _predicted_evidence(run_dir / "predictions" / f"{sub.parent.name}.jsonl", sub.stem)
            made[f"graph {sub.parent.name} {sub.stem}"] = evidence_graph(
                graal_subgraph_for_figure(data, decisive), out / f"graph_{sub.parent.name}_{sub.stem}.png"
            )
        except (ValueError, KeyError) as e:
            logger.warning("%s: cannot draw: %s", sub, e)
    return {k: str(v.relative_to(run_dir)) for k, v in made.items()}


def _predicted_evidence(predictions: Path, claim_id: str) -> set[tuple[str, int]]:
    """The predicted evidence ids of one claim in a system's predictions file (empty if absent)."""
    if not predictions.is_file():
        return set()
    with open(predictions, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if str(rec.get("id")) == claim_id:
                return {(p, int(n)) for p, n in rec.get("predicted_evidence", [])}
    return set()


def graal_subgraph_for_figure(subgraph: Mapping, decisive: set[tuple[str, int]] = frozenset()) -> dict:
    """GRAAL's ``subgraph()`` export (edges with ``u``/``v``/``page``/``line``) -> the
    :func:`evidence_graph` format; edges whose sentence is in ``decisive`` (the system's
    predicted evidence) are marked.  A dict already in the figure format is returned as is."""
    edges = list(subgraph.get("edges", []))
    if not edges or "source" in edges[0]:
        return dict(subgraph)
    return {
        "claim": subgraph.get("claim", ""),
        "label": subgraph.get("label", ""),
        "vertices": [
            {"id": v["id"], "role": "claim-entity" if v.get("role") == "claim" else "between"}
            for v in subgraph.get("vertices", [])
        ],
        "edges": [
            {
                "source": e["u"],
                "target": e["v"],
                "sentence": [e["page"], e["line"]],
                "decisive": (e["page"], int(e["line"])) in decisive,
            }
            for e in edges
        ],
    }
