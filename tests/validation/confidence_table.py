"""How often the calibrated baseline reproduces a bundle well enough for a confident prediction.

    python tests/validation/confidence_table.py BUNDLE [BUNDLE ...] [--slo "p95 ttft < 1s, ..."]

For each bundle (a folder or capture file): calibrate without ``--base`` (what ``triage``
does), replay with no change, and print the model error of every SLO percentile (calibrated
baseline against observed), whether it is within ``MODEL_TOLERANCE_PCT`` for all of them
(the planner's "anchored" predictions), the sampling ratio when traces were sampled, and the
calibration's gaps.  Ends with the confident share and the median |model error| - the two
figures issue 15 targets (>= 80 %, <= 15 %).  A bundle whose calibration raises counts as not
confident and prints its error."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent / "src")]

from tailtriage.analyses.slo import parse_slos  # noqa: E402
from tailtriage.errors import TailtriageError  # noqa: E402
from tailtriage.remediation.whatif import MODEL_TOLERANCE_PCT, Replay  # noqa: E402
from tailtriage.store.input import load_capture  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundles", nargs="+", type=Path)
    ap.add_argument("--slo", default="p95 ttft < 1s, p95 e2e < 30s")
    args = ap.parse_args()
    slos = parse_slos(args.slo)
    confident = 0
    errors: list[float] = []
    print("| bundle | model error | confident | sampled | gaps | s |")
    print("|---|---|---|---:|---|---:|")
    for path in args.bundles:
        t = time.perf_counter()
        try:
            with Replay(load_capture(path), slos, seed=0) as rep:
                pred = rep.predict({})
                fit = rep.calibration.fit
        except TailtriageError as exc:
            print(f"| {path} | {type(exc).__name__}: {exc} | no | | | |")
            continue
        errs = {str(s.spec): s.model_error_pct for s in pred.slos}
        ok = all(s.within_tolerance for s in pred.slos)
        confident += ok
        errors += [abs(e) for e in errs.values() if e is not None]
        sampled = fit.parts.get("sampling", {}).get("ratio")
        shown = ", ".join(f"{k}: {v:+.1f}%" for k, v in errs.items() if v is not None)
        print(
            f"| {path} | {shown} | {'yes' if ok else 'no'} | "
            f"{'' if sampled is None else f'{sampled:.1%}'} | "
            f"{', '.join(g.part for g in fit.gaps)} | {time.perf_counter() - t:.0f} |"
        )
    n = len(args.bundles)
    median = statistics.median(errors) if errors else float("nan")
    print(
        f"\nconfident (every SLO within {MODEL_TOLERANCE_PCT:.0f} %): {confident} of {n}; "
        f"median |model error| {median:.1f} %"
    )


if __name__ == "__main__":
    main()
