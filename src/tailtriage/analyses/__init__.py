"""Analyses: pure functions from a Store (SQL over the Capture's logical tables) to frozen results.

``tail.analyze_tail(store, slos)`` runs the whole tail analysis; its parts:

* ``slo``            SLO specs (``"p95 ttft < 500ms"``)
* ``quantiles``      every quantile estimator: exact with CIs, ``histogram_quantile``
* ``metrics``        per-request TTFT, ITL, TPOT, e2e as SQL relations, and their percentiles
* ``windows``        percentiles over time bins; incident and baseline windows
* ``decomposition``  stage breakdown of the tail, per-stage percentiles, breakdowns by group
* ``attribution``    counterfactual percentiles and Shapley values over stages
* ``pods``           each pod's ReplicaSet and lifecycle (created, started, Ready, stopped)
* ``rollout``        a rolling update: latency by version, warm-up, capacity dip, strategy
* ``results``        the frozen result types shared with diagnosis and the report
* ``tail``           the whole analysis of one capture, in order

and for captures without request spans:

* ``histograms``      Prometheus classic histograms in ``series``, as PromQL reads them
* ``engine_metrics``  the tail analysis from the engines' own histograms
* ``combine``         requests and engine histograms together: which answers, where they differ
"""
