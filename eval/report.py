"""``report.md`` of a comparison run, from ``metrics.json`` data and the resolved configs (no models)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from eval.verification_eval import macro_f1_ci_text, metrics_table
from garag.artifacts import write_text_atomic
from garag.config import Config
from garag.cpu import CPU

EXAMPLE_QUOTE = 220


def _f(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _p(x: float) -> str:
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def _flatten(d: Mapping, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out |= _flatten(v, key + ".")
        else:
            out[key] = v
    return out


def headline_table(metrics: Mapping) -> str:
    """Accuracy and FEVER score with 95% bootstrap intervals, plus the other headline metrics."""
    with_ci = any(metrics["per_system"][n].get("macro_f1_ci") for n in metrics["systems"])
    f1_head = "macro-F1 [95% CI]" if with_ci else "macro-F1"
    lines = [
        f"| system | n | accuracy [95% CI] | FEVER score [95% CI] | {f1_head} | evidence F1 | R@5 | R@20 "
        "| hit rate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in metrics["systems"]:
        m = metrics["per_system"][name]
        acc, fs, r = m["ci"]["accuracy"], m["ci"]["fever_score"], m["retrieval"]
        lines.append(
            f"| {name} | {m['n']} | {acc[0]:.3f} [{acc[1]:.3f}, {acc[2]:.3f}] | "
            f"{fs[0]:.3f} [{fs[1]:.3f}, {fs[2]:.3f}] | {m['macro_f1']:.3f}{macro_f1_ci_text(m)} | "
            f"{m['evidence_f1']:.3f} | "
            f"{_f(r.get('recall@5'))} | {_f(r.get('recall@20'))} | {_f(r.get('hit_rate'))} |"
        )
    hover = [n for n in metrics["systems"] if metrics["per_system"][n].get("groups")]
    if hover:
        hops = sorted({h for n in hover for h in metrics["per_system"][n]["groups"]}, key=str)
        lines += [
            "",
            "| system | HoVer score | "
            + " | ".join(f"{h}-hop acc / macro-F1 / HoVer score" for h in hops)
            + " |",
            "|---|---|" + "---|" * len(hops),
        ]
        for name in hover:
            m = metrics["per_system"][name]
            cells = []
            for h in hops:
                g = m["groups"].get(h)
                cells.append(
                    f"{g['accuracy']:.3f} / {g['macro_f1']:.3f}{macro_f1_ci_text(g)} / "
                    f"{g.get('hover_score', 0.0):.3f}"
                    if g
                    else "-"
                )
            lines.append(f"| {name} | {m.get('hover_score', 0.0):.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _f1_row(what: str, c: Mapping) -> str:
    bs = c["bootstrap"]
    return (
        f"| {what} | {c['n']} | {c['a']:.3f} | {c['b']:.3f} | {bs['difference']:+.3f} "
        f"[{bs['low']:+.3f}, {bs['high']:+.3f}] | - | - |"
    )


def _pair_row(what: str, c: Mapping) -> str:
    mc, bs = c["mcnemar"], c["bootstrap"]
    return (
        f"| {what} | {c['n']} | {c['a']:.3f} | {c['b']:.3f} | {bs['difference']:+.3f} "
        f"[{bs['low']:+.3f}, {bs['high']:+.3f}] | {mc['b']} / {mc['c']} | "
        f"{_p(mc['p_value'])} ({mc['method']}) |"
    )


def significance_table(metrics: Mapping) -> str:
    """Paired differences (B - A) with bootstrap intervals and McNemar p-values, overall and per hops."""
    lines = []
    for pair in metrics["paired"]:
        lines += [
            f"**{pair['b']}** vs **{pair['a']}** (difference = {pair['b']} - {pair['a']}; "
            f"discordant = right only for {pair['a']} / right only for {pair['b']})",
            "",
            "| metric | n | A | B | difference [95% CI] | discordant | McNemar p |",
            "|---|---|---|---|---|---|---|",
            _pair_row("accuracy", pair["accuracy"]),
            _pair_row("FEVER score", pair["fever_score"]),
        ]
        if "hover_score" in pair:
            lines.append(_pair_row("HoVer score", pair["hover_score"]))
        if "macro_f1" in pair:
            lines.append(_f1_row("macro-F1", pair["macro_f1"]))
        for hops, c in pair.get("hops", {}).items():
            lines.append(_pair_row(f"accuracy, {hops} hops", c["accuracy"]))
            lines.append(_pair_row(f"FEVER score, {hops} hops", c["fever_score"]))
            if "hover_score" in c:
                lines.append(_pair_row(f"HoVer score, {hops} hops", c["hover_score"]))
            if "macro_f1" in c:
                lines.append(_f1_row(f"macro-F1, {hops} hops", c["macro_f1"]))
        only = pair["only_one_right"]
        lines += [
            "",
            f"Claims strictly right only for {pair['a']}: {len(only['only_a'])}; "
            f"only for {pair['b']}: {len(only['only_b'])}.",
            "",
        ]
    return "\n".join(lines) + "\n"


def slices_table(metrics: Mapping) -> str:
    names = metrics["systems"]
    head = "| slice | n | " + " | ".join(f"{n} acc | {n} FEVER" for n in names) + " |"
    lines = [head, "|---|---|" + "---|---|" * len(names)]
    for row in metrics["slices"]:
        cells = " | ".join(
            f"{row['systems'][n]['accuracy']:.3f} | {row['systems'][n]['fever_score']:.3f}" for n in names
        )
        lines.append(f"| {row['slice']} | {row['n']} | {cells} |")
    return "\n".join(lines) + "\n"


def contrast_section(metrics: Mapping) -> list[str]:
    """Each system's accuracy per change type, its pairs both right, and its twins' accuracy where
    their claim is right / wrong, where the claims are a contrast set (``garag contrast``); nothing
    otherwise."""
    names = [n for n in metrics["systems"] if metrics["per_system"][n].get("contrast")]
    if not names:
        return []
    per = {n: metrics["per_system"][n]["contrast"] for n in names}
    head = "| change | n | " + " | ".join(f"{n} acc | {n} pairs | {n} if claim right / wrong" for n in names)
    lines = ["## Contrast set", "", head + " |", "|---|---|" + "---|---|---|" * len(names)]
    changes = list(per[names[0]]["by_change"]) + ["all changed"]
    for change in changes:
        cells = []
        for n in names:
            if change == "all changed":
                acc, pair = per[n]["changed"], per[n]["pairs"]
            else:
                acc, pair = per[n]["by_change"][change], per[n]["pairs"]["by_change"].get(change)
            both = f"{pair['consistent']:.3f}" if pair and pair["n"] else ""
            cells.append(f"{acc['accuracy']:.3f} | {both} | {_given_the_claim(pair)}")
        n_claims = (
            per[names[0]]["changed"] if change == "all changed" else per[names[0]]["by_change"][change]
        )["n"]
        lines.append(f"| {change} | {n_claims} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _given_the_claim(pair: Mapping | None) -> str:
    """Twins' accuracy where their claim is right, then where it is wrong ("-": no such twin)."""
    if not pair or not pair["n"]:
        return ""
    given = (pair["if_original_right"], pair["if_original_wrong"])
    return " / ".join(f"{m['accuracy']:.3f}" if m["n"] else "-" for m in given)


def attribution_section(metrics: Mapping) -> str:
    lines = []
    for name in metrics["systems"]:
        a = metrics["per_system"][name]["attribution"]
        lines.append(f"**{name}**: {a['sentences']} gold sentences of verifiable claims.")
        lines.append("")
        lines.append("| retriever(s) | gold sentences found | share |")
        lines.append("|---|---|---|")
        for combo, n in a["combinations"].items():
            lines.append(f"| {combo} | {n} | {n / max(1, a['sentences']):.3f} |")
        found = ", ".join(f"{k} {v}" for k, v in sorted(a["found_by"].items()))
        only = ", ".join(f"{k} {v}" for k, v in sorted(a["only_by"].items())) or "none"
        graph_only = metrics["per_system"][name]["graph_only_claims"]
        lines += [
            "",
            f"Found by each retriever: {found or 'none'}. Found by one retriever only: {only}. "
            f"Claims whose whole gold set only the graph retriever found: {len(graph_only)}"
            + (f" (ids: {', '.join(map(str, graph_only[:10]))})" if graph_only else "")
            + ".",
            "",
        ]
    return "\n".join(lines)


def explanations_table(metrics: Mapping) -> str:
    lines = [
        "| system | explanations | citing ids | cited ids exist | cited ids retrieved | faithful (NLI) |",
        "|---|---|---|---|---|---|",
    ]
    for name in metrics["systems"]:
        e = metrics["per_system"][name]["explanations"]
        exist = _f(e["cited_exist"]) if e.get("existence_checked", True) else "not checked"
        lines.append(
            f"| {name} | {e['n']} | {e['with_citations']} | {exist} | {_f(e['cited_retrieved'])} | "
            f"{_f(e['faithful'])} |"
        )
    return "\n".join(lines) + "\n"


GARAG_METRICS = (
    ("logical_consistency", "logical consistency"),
    ("hallucination_rate", "hallucination rate"),
    ("factual_grounding", "factual grounding"),
    ("graph_coverage", "graph coverage"),
    ("graph_completeness", "graph completeness"),
    ("context_precision", "context precision"),
    ("response_time_s", "response time (s/claim)"),
)


def garag_table(metrics: Mapping) -> str:
    """The GA-RAG paper's metrics per system ("-" where a metric does not apply; README defines them)."""
    lines = [
        "| system | " + " | ".join(title for _, title in GARAG_METRICS) + " |",
        "|---|" + "---|" * len(GARAG_METRICS),
    ]
    for name in metrics["systems"]:
        g = metrics["per_system"][name].get("garag", {})
        cells = [("-" if g.get(key) is None else _f(g[key])) for key, _ in GARAG_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def cost_table(metrics: Mapping) -> str:
    lines = [
        "| system | stage | mean ms | median ms | p95 ms |",
        "|---|---|---|---|---|",
    ]
    notes = []
    for name in metrics["systems"]:
        c = metrics["per_system"][name]["cost"]
        for stage, s in {**c["stages"], "total": c["total"]}.items():
            lines.append(
                f"| {name} | {stage} | {s['mean'] * 1000:.1f} | {s['median'] * 1000:.1f} "
                f"| {s['p95'] * 1000:.1f} |"
            )
        cps = c["claims_per_second"]
        llm = c["llm_per_claim"]
        notes.append(
            f"{name}: {_f(cps, 2)} claims/s ({c['claims_per_second_source']})"
            + (
                f"; LLM per claim: {llm['calls']:.2f} calls, {llm['prompt_tokens']:.0f} prompt + "
                f"{llm['completion_tokens']:.0f} completion tokens; {llm_counts(c)}"
                if llm
                else "; no LLM calls"
            )
        )
    if metrics.get("cpu"):
        notes.append(f"timed on {CPU.from_dict(metrics['cpu']).line()} (env.json)")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def llm_counts(cost: Mapping) -> str:
    """Cache hits and the counted failures of a run's LLM calls, for the cost notes."""
    t = cost.get("llm_totals") or {}
    rate = cost.get("llm_cache_hit_rate")
    served = int(t.get("cache_hits", 0) + t.get("calls", 0))
    hits = f"cache hits {int(t.get('cache_hits', 0))}/{served}"
    if rate is not None:
        hits += f" ({rate:.0%})"
    keys = ("timeouts", "invalid", "repaired", "fallbacks", "verifier_fallbacks", "invalid_citations")
    return hits + ", " + ", ".join(f"{k.replace('_', ' ')} {int(t.get(k, 0))}" for k in keys)


def settings_section(configs: Mapping[str, Config]) -> str:
    """The settings where systems differ, then the shared ones (collapsed)."""
    flat = {n: _flatten(c.to_dict()) for n, c in configs.items()}
    keys = sorted(set().union(*flat.values()))
    names = list(configs)
    differ = [k for k in keys if len({repr(flat[n].get(k)) for n in names}) > 1]
    lines = ["| setting | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for k in differ:
        lines.append(f"| `{k}` | " + " | ".join(f"`{flat[n].get(k)!r}`" for n in names) + " |")
    same = [k for k in keys if k not in differ]
    lines += ["", "<details><summary>shared settings</summary>", ""]
    lines += [f"- `{k}` = `{flat[names[0]].get(k)!r}`" for k in same]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _short(text: str) -> str:
    return text if len(text) <= EXAMPLE_QUOTE else text[:EXAMPLE_QUOTE].rsplit(" ", 1)[0] + "..."


def examples_section(metrics: Mapping) -> str:
    lines = []
    for ex in metrics["examples"]:
        gold = "; ".join(" + ".join(f"({p}, {n})" for p, n in g) for g in ex["gold_evidence"] if g) or "none"
        lines += [
            f'#### Claim {ex["id"]}: "{ex["claim"]}"',
            "",
            f"Gold: **{ex['gold']}**, evidence {gold}.",
            "",
        ]
        for name, s in ex["systems"].items():
            mark = "right" if str(s["label"]).upper() == str(ex["gold"]).upper() else "wrong"
            lines.append(f"- **{name}** -> {s['label']} ({mark}). {s['explanation']}")
            for p, n, text in s["evidence"][:5]:
                lines.append(f"  - ({p}, {n}) {_short(text)}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _skipped_lines(metrics: Mapping) -> list[str]:
    """Where claims were skipped while reading (``data.skip_bad_lines``), if any were."""
    skipped = metrics.get("skipped_claims") or {}
    counts = {k: v for k, v in (skipped.get("counts") or {}).items() if k != "gold_page_missing_from_corpus"}
    if not counts:
        return []
    where = "; ".join(skipped.get("examples", [])[:5])
    total = sum(counts.values())
    return [f"Skipped while reading the claims (`data.skip_bad_lines`): {total} ({counts}): {where}", ""]


def render_report(metrics: Mapping, configs: Mapping[str, Config], figures: Mapping[str, str]) -> str:
    """The whole Markdown report."""
    sample = (
        f", stratified sample of {metrics['sample']} (seed {metrics['seed']})"
        if metrics.get("sample")
        else ""
    )
    parts = [
        f"# Comparison {metrics['run_id']}",
        "",
        f"Dataset **{metrics['dataset']}**: {metrics['n_scored']} of {metrics['n_claims']} claims "
        f"scored{sample}. "
        f"Systems: {', '.join(metrics['systems'])} (the first is the baseline). Intervals: paired percentile "
        f"bootstrap, {metrics['n_resamples']} resamples, seed {metrics['seed']}. "
        "McNemar: exact binomial below "
        "25 discordant claims, else chi-square with continuity correction. Macro-F1 is not a per-claim "
        "score: its intervals recompute it on each resample, and it has no McNemar test.",
        "",
        *_skipped_lines(metrics),
        "## Headline",
        "",
        headline_table(metrics),
        "## Paired significance",
        "",
        significance_table(metrics),
        "## Figures",
        "",
        *[f"![{name}]({path})" for name, path in figures.items()],
        "",
        "## Slices",
        "",
        slices_table(metrics),
        *contrast_section(metrics),
        "## Which retriever found the gold evidence",
        "",
        attribution_section(metrics),
        "## Explanations",
        "",
        explanations_table(metrics),
        "## GA-RAG metrics",
        "",
        garag_table(metrics),
        "## Cost",
        "",
        cost_table(metrics),
        "## Per-system details",
        "",
        *[metrics_table(name, metrics["per_system"][name]) for name in metrics["systems"]],
        "## Settings",
        "",
        settings_section(configs),
        "## Worked examples",
        "",
        examples_section(metrics),
    ]
    return "\n".join(parts)


def write_report(
    run_dir: Path, metrics: Mapping, configs: Mapping[str, Config], figures: Mapping[str, str]
) -> Path:
    """Write ``run_dir/report.md``; returns its path."""
    path = run_dir / "report.md"
    write_text_atomic(path, render_report(metrics, configs, figures))
    return path
