"""Doctor: which telemetry is missing for triage, what it leaves undecidable, and the fix.

``run.examine(capture, slos)`` runs every registered check and returns a
:class:`DoctorResult`; its parts:

* ``run``                run every registered check over one capture
* ``gap``                a Gap (what, undecidable stages/causes, fix, cost) and the result
* ``facts``              one SQL pass that measures what the capture holds
* ``check``              the Check protocol and its name registry
* ``checks_traces``      engine spans and phases, service names, trace context, gateway timing,
  clock skew, where TTFT is stamped
* ``checks_sampling``    traced requests against what the SLO's percentile needs
* ``checks_kubernetes``  HPA series, pod lifecycle
* ``checks_metrics``     engine metrics and their version, DCGM, scrape interval
* ``fixes``              fix lines naming the ``tailtriage instrument`` file that closes a gap
"""

from tailtriage.doctor.check import Check, register, registered
from tailtriage.doctor.gap import DoctorResult, Gap
from tailtriage.doctor.run import examine

__all__ = ["Check", "DoctorResult", "Gap", "examine", "register", "registered"]
