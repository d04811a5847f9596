"""Benchmark: tailtriage's predictions against the after-fix truth of the realistic corpus.

    python bench/after_fix_corpus.py --keep /tmp/corpus              # the held-out bundles
    python bench/after_fix_corpus.py --keep /tmp/corpus --doc        # ... and the doc section
    python bench/after_fix_corpus.py --split tuning --only=-s1       # tune on the tuning split
    python bench/after_fix_corpus.py --results R.jsonl --report-only --doc
    python bench/after_fix_corpus.py --keep /tmp/corpus --same-as BEFORE.jsonl --results AFTER.jsonl
    python bench/after_fix_corpus.py --split tuning --model-only --keep /tmp/corpus  # fast

For every bundle of the split (issue 15): triage it exactly as ``tailtriage triage BUNDLE
--slo ... --json OUT`` does (what-if on), take the top remediation's overrides, translate them
into the generator's own knobs (``tests/realistic/fix_keys.py``; a key it has no mechanism
for is reported, never approximated), re-run the case's mechanism with the fix
(``tests/realistic``: same seed, same traffic) and take the SLO percentile over the report's
incident window as the truth.  Scored: the prediction's error against that truth, next to the
calibrated baseline's own model error (baseline replay against the observation), per true
primary cause; the confident share (``prediction_basis == "anchored"``: every SLO's model
error within ``MODEL_TOLERANCE_PCT``).  ``--doc`` rewrites the section of
docs/simulator-validation.md between its after-fix markers.  ``--model-only`` scores the
calibrated baseline alone (analyze for the incident window, one calibration, no what-if, no
re-run): the quick loop for tuning the calibration."""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

DOC = ROOT / "docs" / "simulator-validation.md"
BEGIN, END = "<!-- afterfix:begin -->", "<!-- afterfix:end -->"


def _slo_keys(report: Mapping[str, Any]) -> tuple[str, str] | None:
    """(predicted key, model-error key) of the report's first SLO: ``ttft_p95_ms``, ``ttft_p95``."""
    slos = report.get("slos") or []
    if not slos:
        return None
    key = f"{slos[0]['metric']}_p{float(slos[0]['percentile']):g}"
    return f"{key}_ms", key


def _p95_in(outcome: Any, window: tuple[float, float], metric: str) -> float:
    from realistic.truth import Window, truth_of

    t = truth_of(outcome, Window(*window), None)
    return float(t.ttft_p95_ms if metric == "ttft" else t.tpot_p95_ms)


def model_only(folder: Path, slo: str, seed: int = 0) -> dict[str, Any]:
    """The calibrated baseline's model error per SLO, as triage computes it (incident window
    of the analysis, the requests of the incident and baseline windows), without what-ifs."""
    from tailtriage.pipeline.analyze import analyze
    from tailtriage.remediation.whatif import Replay
    from tailtriage.store.base import DuckDBStore
    from tailtriage.store.input import load_capture

    t0 = time.perf_counter()
    with DuckDBStore(load_capture(folder / "bundle")) as store:
        report = analyze(store, slo)
        if report.windows is None:
            return {"action": None}
        wins = [report.windows.incident]
        if report.windows.baseline is not None:
            wins.append(report.windows.baseline)
        local, _ = store.local_requests(wins, 200_000)
        specs = tuple(s.spec for s in report.slos)
        with Replay(local, specs, seed=seed, window=report.windows.incident) as replay:
            pred = replay.predict({})
            cal = replay.calibration
    s = pred.slos[0]
    err = s.model_error_pct
    return {
        "action": "baseline",
        "basis": "anchored" if all(x.within_tolerance for x in pred.slos) else "low_confidence",
        "observed_ms": None if s.observed is None else s.observed * 1e3,
        "predicted_ms": None if s.baseline is None else s.baseline * 1e3,
        "model_error_pct": None if err is None else round(err, 1),
        "gaps": [g.part for g in cal.fit.gaps],
        "triage_s": round(time.perf_counter() - t0, 1),
    }


def run_case(args: tuple[str, str, bool, int]) -> dict[str, Any]:
    """Generate (unless present), triage, re-run the top fix; one JSON-able row."""
    from diagnosis_corpus import triage_json

    from realistic.corpus import case_by_name, read_truth, tuned, write_case
    from realistic.fix_keys import translate
    from realistic.fleet import simulate
    from realistic.spec import with_overrides
    from realistic.variants import build

    name, out, only_model, seed = args
    folder = Path(out) / name
    if not (folder / "truth.json").exists():
        write_case(case_by_name(name), folder)
    truth = read_truth(folder)
    row: dict[str, Any] = {
        "case": name,
        "split": truth["split"],
        "primary": truth["primary"],
        "metric": truth["slo_metric"],
        "sampling": truth["sampling"],
        "seed": seed,
    }
    if only_model:
        try:
            return row | model_only(folder, truth["slo"], seed)
        except Exception as exc:  # a crash is a result too (design 6: never crash)
            return row | {"error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        report, secs = triage_json(folder / "bundle", truth["slo"], True, seed)
    except Exception as exc:  # a crash is a result too (design 6: never crash)
        return row | {"error": f"{type(exc).__name__}: {exc}"[:300]}
    row["triage_s"] = round(secs, 1)
    keys = _slo_keys(report)
    rem = (report.get("remediations") or [None])[0]
    if keys is None or rem is None:
        return row | {"action": None}
    pkey, ekey = keys
    slo = report["slos"][0]
    row |= {
        "action": rem["action"],
        "parameters": rem.get("parameters") or {},
        "basis": rem.get("prediction_basis"),
        "recommended": rem.get("recommended"),
        "observed_ms": slo.get("observed_ms"),
        "model_error_pct": (rem.get("model_error_pct") or {}).get(ekey),
        "predicted_ms": (rem.get("predicted") or {}).get(pkey),
    }
    case = case_by_name(name)
    sc, before = tuned(build(case))
    # a combined remediation lists its actions beside their merged overrides
    overrides = {k: v for k, v in row["parameters"].items() if k != "combined"}
    fix = translate(sc.spec, overrides)
    row["translated"], row["unsupported"] = dict(fix.overrides), list(fix.unsupported)
    if fix.unsupported or not fix.overrides:
        return row
    win = (report.get("windows") or {}).get("incident") or truth["windows"]["incident"]
    window = (win[0] - sc.spec.t0, win[1] - sc.spec.t0)
    after = simulate(with_overrides(sc.spec, fix.overrides), case.seed)
    metric = str(slo["metric"])
    row["truth_before_ms"] = round(_p95_in(before, window, metric), 3)
    row["truth_after_ms"] = round(_p95_in(after, window, metric), 3)
    if row["predicted_ms"] is not None and row["truth_after_ms"] > 0:
        row["prediction_error_pct"] = round(
            100.0 * (row["predicted_ms"] / row["truth_after_ms"] - 1.0), 1
        )
    return row


def run(
    names: Sequence[str],
    out: Path,
    jobs: int,
    results: Path | None,
    only_model: bool = False,
    seed: int = 0,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(run_case, (n, str(out), only_model, seed)) for n in names]
        for i, fut in enumerate(cf.as_completed(futures), 1):
            row = fut.result()
            rows.append(row)
            if results is not None:
                with results.open("ab") as fh:
                    fh.write(orjson.dumps(row) + b"\n")
            err = row.get("prediction_error_pct")
            print(
                f"[{i:3d}/{len(names)}] {row['case']:50s} {row.get('action')!s:24s} "
                f"{row.get('basis')!s:14s} model {row.get('model_error_pct')!s:>7s} "
                f"pred {err!s:>7s} {row.get('error', '')}",
                flush=True,
            )
    return sorted(rows, key=lambda r: str(r["case"]))


# -- scores -----------------------------------------------------------------------------------


def _median_abs(xs: Sequence[float | None]) -> float | None:
    vals = [abs(x) for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} %"


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's three figures over ``rows``."""
    with_pred = [r for r in rows if r.get("action")]
    confident = [r for r in with_pred if r.get("basis") == "anchored"]
    scored = [r for r in with_pred if r.get("prediction_error_pct") is not None]
    return {
        "bundles": len(rows),
        "crashed": sum("error" in r for r in rows),
        "with_fix": len(with_pred),
        "confident": len(confident),
        "model_error": _median_abs([r.get("model_error_pct") for r in with_pred]),
        "scored": len(scored),
        "prediction_error": _median_abs([r["prediction_error_pct"] for r in scored]),
        "confident_prediction_error": _median_abs(
            [r["prediction_error_pct"] for r in scored if r.get("basis") == "anchored"]
        ),
        "unexpressible": sum(bool(r.get("unsupported")) for r in with_pred),
    }


def render(rows: Sequence[Mapping[str, Any]], when: str, split: str) -> str:
    s = summary(rows)
    by: dict[str, list[Mapping[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        by[str(r["primary"])].append(r)
    lines = [
        BEGIN,
        f"### After-fix truth on the realistic corpus ({split} split, {when}; regenerate: "
        "`python bench/after_fix_corpus.py --keep DIR --doc`)",
        "",
        f"{s['bundles']} bundles; {s['with_fix']} with a remediation; **{s['confident']} "
        f"({100.0 * s['confident'] / max(s['bundles'], 1):.0f} %) with a confident (anchored) "
        f"prediction** (target >= 80 %); median |model error| of the calibrated baseline "
        f"**{_fmt(s['model_error'])}** (target <= 15 %); median |after-fix prediction error| "
        f"**{_fmt(s['prediction_error'])}** over the {s['scored']} fixes the generator could "
        f"re-run ({_fmt(s['confident_prediction_error'])} over the confident ones; target "
        f"<= 15 %); {s['unexpressible']} top fixes not expressible in the generator; triage "
        f"crashed on {s['crashed']}.",
        "",
        "| true primary cause | bundles | confident | median abs. model error | re-run fixes "
        "| median abs. prediction error | top fixes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for cause, part in sorted(by.items()):
        c = summary(part)
        acts = collections.Counter(str(r.get("action")) for r in part)
        lines.append(
            f"| `{cause}` | {c['bundles']} | {c['confident']} | {_fmt(c['model_error'])} | "
            f"{c['scored']} | {_fmt(c['prediction_error'])} | "
            + ", ".join(f"{a} x{n}" for a, n in acts.most_common())
            + " |"
        )
    missing = collections.Counter(u.split("=")[0] for r in rows for u in r.get("unsupported") or ())
    lines += [
        "",
        "Fix keys the generator has no mechanism for (the fix is not re-run, not faked): "
        + (", ".join(f"`{k}` x{n}" for k, n in missing.most_common()) or "none")
        + ".",
        "",
        "| bundle | top fix | basis | observed | model error | predicted | after-fix truth "
        "| truth change | prediction error |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in (r.get("parameters") or {}).items())
        lines.append(
            f"| {r['case']} | {r.get('action') or r.get('error', '-')}"
            + (f" (`{params}`)" if params else "")
            + f" | {r.get('basis') or '-'} | {_ms(r.get('observed_ms'))} | "
            f"{_pct(r.get('model_error_pct'))} | {_ms(r.get('predicted_ms'))} | "
            f"{_ms(r.get('truth_after_ms'))} | {_pct(_change(r))} | "
            f"{_pct(r.get('prediction_error_pct'))} |"
        )
    lines.append(END)
    return "\n".join(lines)


def _change(r: Mapping[str, Any]) -> float | None:
    """How much the fix really moved the percentile (after-fix truth against before)."""
    a, b = r.get("truth_after_ms"), r.get("truth_before_ms")
    return None if a is None or not b else 100.0 * (a / b - 1.0)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} ms"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f} %"


def update_doc(section: str) -> None:
    text = DOC.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)


def interleaved(names: Sequence[str]) -> list[str]:
    """One case of each cause in turn, so that a run cut short still covers every cause."""
    by: dict[str, list[str]] = collections.defaultdict(list)
    for n in names:
        by[n.split("-", 1)[0]].append(n)
    queues = [by[k] for k in sorted(by)]
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def split_of_name(name: str, keep: Path, guess: Any) -> str:
    """The split a generated case recorded (the sampling regime is drawn while building),
    else the runner's guess from the name."""
    truth = keep / name / "truth.json"
    if truth.exists():
        return str(orjson.loads(truth.read_bytes())["split"])
    return "held_out" if guess(name) else "tuning"


def main() -> None:
    from diagnosis_corpus import likely_held_out

    from realistic.variants import corpus_cases

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=1, help="bundles in parallel (processes)")
    p.add_argument("--split", choices=("held_out", "tuning"), default="held_out")
    p.add_argument("--only", nargs="*", default=(), help="cases whose name contains one of these")
    p.add_argument("--keep", type=Path, required=True, help="generate into (and reuse) this folder")
    p.add_argument("--results", type=Path, help="write every row as JSON lines here")
    p.add_argument(
        "--same-as", type=Path, help="run exactly the cases of this earlier --results file"
    )
    p.add_argument("--report-only", action="store_true", help="score --results, run nothing")
    p.add_argument("--doc", action="store_true", help="rewrite the doc's after-fix section")
    p.add_argument(
        "--model-only",
        action="store_true",
        help="score the calibrated baseline only (no what-if, no re-run): fast tuning loop",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the what-if replays' seed (triage --seed): run 0, 1, 2 and compare with "
        "--same-as before trusting a change of one or two confident bundles",
    )
    a = p.parse_args()
    if a.report_only:
        if a.results is None:
            p.error("--report-only needs --results FILE")
        rows = [orjson.loads(x) for x in a.results.read_bytes().splitlines() if x]
    else:
        names = [
            c.name
            for c in corpus_cases()
            if split_of_name(c.name, a.keep, likely_held_out) == a.split
            and (not a.only or any(o in c.name for o in a.only))
        ]
        if a.same_as is not None:
            done = {orjson.loads(x)["case"] for x in a.same_as.read_bytes().splitlines() if x}
            names = [n for n in names if n in done]
        if a.results is not None and a.results.exists():
            a.results.unlink()
        rows = run(interleaved(names), a.keep, a.jobs, a.results, a.model_only, a.seed)
    rows = [r for r in rows if r["split"] == a.split]
    s = summary(rows)
    print(orjson.dumps(s, option=orjson.OPT_INDENT_2).decode())
    if a.doc:
        update_doc(render(rows, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.split))
        print(f"results written to {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
